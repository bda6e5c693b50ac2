package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// lockWorker is one program using sessions the way long-running services
// do: one session for many acquisitions, several locks at once, quick
// cycles, releases on expired contexts and their retries.
type lockWorker struct {
	r       *reuseRun
	ctx     context.Context // the workload's
	id      int
	name    string
	c       *reuseClient
	rng     *rand.Rand
	control string // the negative control this worker plays, if any
	tryBias int    // percent of acquisitions made with TryAcquire

	s         *lock.Session
	rec       *sessionRec
	fresh     bool          // no acquisition on s yet
	retire    time.Duration // when s is to be closed or abandoned
	held      map[string]*held
	retries   []pendingRelease
	abandoned []abandonedSession
	tokens    map[string]fencing.Token // stale-token control: the first token per name
}

type abandonedSession struct {
	s   *lock.Session
	rec *sessionRec
}

func (r *reuseRun) lockWorker(ctx context.Context, id int) {
	w := &lockWorker{r: r, ctx: ctx, id: id, name: fmt.Sprintf("w%d", id), c: r.clients[id],
		rng: rand.New(rand.NewPCG(r.cfg.seed, uint64(id)+1)), held: map[string]*held{}, tokens: map[string]fencing.Token{}}
	if id == 0 {
		w.control = r.cfg.control
	}
	// Most workers are cron-like: they skip a busy name (TryAcquire) rather
	// than wait for it; w2 mostly waits.
	w.tryBias = 100
	if id == 2 || w.control != "" {
		w.tryBias = w.rng.IntN(60)
	}
	for ctx.Err() == nil {
		if !w.ensureSession(ctx) {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		w.tend()
		if w.s == nil {
			continue // tend abandoned the session
		}
		w.step(ctx)
	}
	w.finish()
}

// ensureSession replaces a lost or closed session by a new one.
func (w *lockWorker) ensureSession(ctx context.Context) bool {
	if w.s != nil && w.s.Err() == nil {
		return true
	}
	if w.s != nil {
		w.endAll()
		w.closeSession(false)
	}
	sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	s, err := lock.NewSession(sctx, w.c.cli, lock.WithTTL(w.r.cfg.ttl), lock.WithOwner(w.name),
		lock.WithPrefix(w.r.prefix), lock.WithCleanupTimeout(time.Second))
	if err != nil {
		return false
	}
	w.s, w.rec, w.fresh = s, w.r.addSession(w.name, s), true
	life := time.Duration(1000+w.rng.IntN(5000)) * time.Millisecond
	if w.tryBias == 100 {
		life = time.Duration(2000+w.rng.IntN(3000)) * time.Millisecond // a session per cron run
	}
	w.retire = w.r.now() + life
	return true
}

// tend reacts to lost locks, releases locks that are due and retries
// failed releases that are due.
func (w *lockWorker) tend() {
	now := w.r.now()
	for _, name := range w.heldNames() {
		h := w.held[name]
		if h == nil {
			continue
		}
		lost := false
		select {
		case <-h.l.Context().Done():
			lost = errors.Is(h.l.Err(), lock.ErrLost) && w.control != reuseIgnoreLost
		default:
		}
		switch {
		case lost:
			w.release(h, 2*time.Second)
			if w.rng.IntN(2) == 0 {
				// Straight back for the same name on the same session,
				// with a short context: on a lock-delay name, inside
				// the delay its own unclean end started.
				w.r.count("re-acquisitions after a loss")
				w.acquire(w.ctx, name, w.rng.IntN(100) < w.tryBias, time.Duration(20+w.rng.IntN(1500))*time.Millisecond, w.holdFor())
			}
		case now >= h.g.due && w.control != reuseIgnoreLost && w.rng.IntN(100) < 35:
			w.badRelease(h)
		case now >= h.g.due:
			w.release(h, 2*time.Second)
		}
	}
	kept := w.retries[:0]
	for _, rt := range w.retries {
		if rt.due > now {
			kept = append(kept, rt)
			continue
		}
		w.retryRelease(rt.h)
	}
	w.retries = kept
}

// step does one thing the PRNG draws: acquire (blocking with a short
// timeout, or TryAcquire), a quick cycle, retiring the session, or a pause.
func (w *lockWorker) step(ctx context.Context) {
	k := w.rng.IntN(100)
	switch {
	case w.r.now() >= w.retire && w.control != reuseIgnoreLost:
		k = 100 // the session has served its time
	case w.fresh && w.rng.IntN(100) < 85:
		k = 50 // a fresh session often starts with a quick cycle
	case w.control == reusePartialSet && k < 60:
		k = 65 // the control's hazard is a set
	case w.control != "" && w.control != reusePartialSet && k >= 60 && k < 69:
		k = 69 // the other controls' hazards need locks held as usual
	}
	switch {
	case k < 45:
		if name, ok := w.freeName(); ok {
			w.acquire(ctx, name, w.rng.IntN(100) < w.tryBias, w.timeout(name, time.Duration(20+w.rng.IntN(1500))*time.Millisecond), w.holdFor())
		}
	case k < 60: // acquire, release at once, acquire another
		if name, ok := w.freeName(); ok {
			if w.acquire(ctx, name, w.fresh || w.rng.IntN(100) < w.tryBias, 300*time.Millisecond, -1) != nil {
				w.r.count("quick cycles")
			}
			if next, ok := w.freeName(); ok {
				w.acquire(ctx, next, w.rng.IntN(100) < w.tryBias, time.Duration(20+w.rng.IntN(500))*time.Millisecond, w.holdFor())
			}
		}
	case k < 63:
		if name, ok := w.freeName(); ok {
			w.endWhileWaiting(ctx, name)
		}
	case k < 69:
		w.acquireSet(ctx, time.Duration(20+w.rng.IntN(2000))*time.Millisecond, w.holdFor())
	case k == 100:
		w.endAll()
		w.closeSession(w.rng.IntN(5) == 0)
	default:
		time.Sleep(time.Duration(1+w.rng.IntN(30)) * time.Millisecond)
	}
}

// acquire takes name, to hold for hold, or — with a negative hold — to
// release at once (a quick cycle). It returns nil if it got nothing.
func (w *lockWorker) acquire(ctx context.Context, name string, try bool, timeout, hold time.Duration) *held {
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var (
		l    *lock.Lock
		err  error
		kind = "acquire"
	)
	opts, shared := w.opts(name)
	if try {
		kind = "try"
		l, err = w.s.TryAcquire(actx, name, opts...)
	} else {
		l, err = w.s.Acquire(actx, name, opts...)
	}
	if err == nil || !try {
		w.fresh = false // a failed TryAcquire left no key, and watched nothing
	}
	if err != nil {
		w.r.count(kind + " errors")
		if try {
			time.Sleep(time.Duration(5+w.rng.IntN(30)) * time.Millisecond) // busy: come back later
		}
		return nil
	}
	start := w.r.now()
	if hold < 0 {
		// A quick cycle: released at once, and recorded afterwards, so
		// that nothing the checker does comes between the two calls.
		if d := w.rng.IntN(6) - 2; d > 0 {
			time.Sleep(time.Duration(d) * time.Millisecond)
		}
		call := w.r.now()
		rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		rerr := l.Release(rctx)
		cancel()
		g := w.r.grantedAs(kind, w.name, w.id, w.rec, w.reported(name), l.Key(), l.Token(), start, call, w.reportedShared(name, shared), 0)
		w.staleToken(g)
		w.r.releasing(g, call)
		h := &held{l: l, g: g}
		if rerr != nil {
			w.retries = append(w.retries, pendingRelease{h: h, due: w.r.now() + 100*time.Millisecond})
		} else {
			w.r.releasedOK(g)
		}
		return h
	}
	g := w.r.grantedAs(kind, w.name, w.id, w.rec, w.reported(name), l.Key(), l.Token(), start, start+hold, w.reportedShared(name, shared), 0)
	w.staleToken(g)
	h := &held{l: l, g: g}
	w.held[name] = h
	return h
}

// timeout is d, or for a lock-delay name half the time d plus twice the
// delay: long enough to wait one out, so that holders follow unclean ends.
func (w *lockWorker) timeout(name string, d time.Duration) time.Duration {
	if w.r.cfg.delayed(name) && w.rng.IntN(2) == 0 {
		return d + 2*w.r.cfg.lockDelay
	}
	return d
}

// opts are the options of an acquisition of name, and whether it is a
// reader: the run's lock-delay on the "d" names (except for the
// skip-delay control's worker), a semaphore's limit on "s" (the
// over-limit control's worker takes another semaphore, see reported), a
// reader or a writer on "r".
func (w *lockWorker) opts(name string) ([]lock.AcquireOption, bool) {
	switch kindOf(name) {
	case kindDelayName:
		if w.control == reuseSkipDelay {
			w.controlled()
			return nil, false
		}
		return []lock.AcquireOption{lock.WithLockDelay(w.r.cfg.lockDelay)}, false
	case kindSemaphoreName:
		return []lock.AcquireOption{lock.WithLimit(reuseLimit)}, false
	case kindRWName:
		if w.rng.IntN(100) < 60 {
			return []lock.AcquireOption{lock.WithShared()}, true
		}
	}
	return nil, false
}

// reported is the name a grant of name is reported under: the over-limit
// control's worker reports a grant of its own semaphore "s-shadow" as one
// of "s" while "s" has as many holders as its limit.
func (w *lockWorker) reported(name string) string {
	if w.control == reuseOverLimit && name == "s-shadow" && w.r.holders("s") >= reuseLimit {
		w.controlled()
		return "s"
	}
	return name
}

// reportedShared is whether a grant of name is reported as a reader: the
// reader-as-writer control's worker reports its readers as writers, which
// other readers overlap.
func (w *lockWorker) reportedShared(name string, shared bool) bool {
	if w.control == reuseReaderAsWriter && shared {
		w.controlled()
		return false
	}
	return shared
}

func (w *lockWorker) controlled() {
	w.r.mu.Lock()
	w.r.controlled = true
	w.r.mu.Unlock()
}

// acquireSet takes two or three of the plain names at once (AcquireAll),
// to hold for hold.
func (w *lockWorker) acquireSet(ctx context.Context, timeout, hold time.Duration) {
	var free []string
	for _, n := range w.r.cfg.names {
		if kindOf(n) == kindPlainName && w.held[n] == nil {
			free = append(free, n)
		}
	}
	if len(free) < 2 || len(w.held) > 1 {
		return
	}
	w.rng.Shuffle(len(free), func(i, j int) { free[i], free[j] = free[j], free[i] })
	names := free[:2+w.rng.IntN(len(free)-1)]
	if w.control == reusePartialSet {
		names = free[:2] // leaves names for others to hold
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	l, err := w.s.AcquireAll(actx, names)
	w.fresh = false
	if err != nil {
		w.r.count("set errors")
		return
	}
	start := w.r.now()
	w.r.mu.Lock()
	w.r.sets++
	set := w.r.sets
	w.r.mu.Unlock()
	h := &held{l: l}
	for i, name := range names {
		g := w.r.grantedAs("set", w.name, w.id, w.rec, name, l.Keys()[i], l.Token(), start, start+hold, false, set)
		if i == 0 {
			h.g = g
		} else {
			h.more = append(h.more, g)
		}
		w.held[name] = h
	}
	if w.control == reusePartialSet {
		w.phantom(ctx, l, h, set, hold)
	}
}

// phantom is the partial-set control's breakage: the set reports as held
// a name it does not hold, which another worker holds. The claim starts
// once etcd shows that holder's key still there, so that no deletion of
// it called earlier excuses the overlap; its holder means to keep it a
// while yet, so that the two intervals overlap rather than touch. It
// looks for such a name for up to 2 s of the set's hold: on a loaded
// machine the other workers may hold nothing that long at the moment the
// set is granted.
func (w *lockWorker) phantom(ctx context.Context, l *lock.Lock, h *held, set int, hold time.Duration) {
	mine := func(name string) bool { return w.held[name] != nil }
	deadline := w.r.now() + min(hold, 2*time.Second)
	for {
		n, key := w.r.heldByOthers(w.name, w.r.now()+200*time.Millisecond, mine)
		if n != "" {
			if resp, err := w.c.cli.Get(ctx, key); err == nil && len(resp.Kvs) > 0 {
				w.claimPhantom(l, h, set, n, hold)
				return
			}
		}
		if w.r.now() >= deadline {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// claimPhantom records the partial-set control's claim on n.
func (w *lockWorker) claimPhantom(l *lock.Lock, h *held, set int, n string, hold time.Duration) {
	start := w.r.now()
	// A key of its own, so that no deletion is attributed to it.
	h.more = append(h.more, w.r.grantedAs("set", w.name, w.id, w.rec, n, l.Keys()[0]+"-phantom", l.Token(), start, start+hold, false, set))
	w.controlled()
}

// endWhileWaiting starts an acquisition of name and, while it may still be
// waiting, closes or abandons the session under it. An acquisition that
// got the lock first holds it until the session's end.
func (w *lockWorker) endWhileWaiting(ctx context.Context, name string) {
	type outcome struct {
		l   *lock.Lock
		err error
		at  time.Duration
	}
	res := make(chan outcome, 1)
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, rec := w.s, w.rec
	opts, shared := w.opts(name)
	go func() {
		l, err := s.Acquire(actx, name, opts...)
		res <- outcome{l, err, w.r.now()}
	}()
	time.Sleep(time.Duration(1+w.rng.IntN(400)) * time.Millisecond)
	abandon := w.rng.IntN(3) == 0
	call := w.r.now()
	w.endAll()
	w.closeSession(abandon)
	o := <-res
	if o.err != nil {
		w.r.count("acquisitions ended by their session's end")
		return
	}
	w.r.count("acquisitions that won the race with their session's end")
	// Active from its return until the session's end began.
	g := w.r.grantedAs("acquire", w.name, w.id, rec, name, o.l.Key(), o.l.Token(), o.at, o.at, shared, 0)
	w.r.ended(g, max(o.at, call), nil, false)
}

// staleToken is the stale-token control's breakage: the client caches the
// first token it got for a name and goes on using it.
func (w *lockWorker) staleToken(g *grant) {
	if w.control != reuseStaleToken {
		return
	}
	tok, ok := w.tokens[g.name]
	if !ok {
		w.tokens[g.name] = g.real
		return
	}
	w.r.mu.Lock()
	g.token = tok
	w.r.controlled = true
	w.r.mu.Unlock()
}

// endAll ends the believed-ACTIVE interval of every held lock, at the
// loss the library reported for it if there was one (a program watches
// Lock.Lost; the ignore-lost control does not).
func (w *lockWorker) endAll() {
	for _, name := range w.heldNames() {
		h := w.held[name]
		for _, g := range h.grants() {
			w.r.ended(g, w.r.now(), h.l.Err(), w.control != reuseIgnoreLost)
		}
	}
	clear(w.held)
}

// closeSession closes (or abandons) the current session.
func (w *lockWorker) closeSession(abandon bool) {
	if errors.Is(w.s.Err(), lock.ErrSessionLost) {
		w.r.mu.Lock()
		w.rec.lost = true
		w.r.mu.Unlock()
	}
	w.r.closeSession(w.rec, w.r.now(), abandon)
	if abandon {
		w.r.count("session abandons")
	} else {
		w.r.count("session closes")
	}
	if abandon {
		w.s.Abandon()
		if w.rng.IntN(2) == 0 {
			// Close at once, as Abandon allows: it revokes the lease,
			// but the end stays unclean.
			w.r.count("session abandons closed at once")
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			w.r.closed(w.rec, w.s.Close(ctx))
			cancel()
		} else {
			w.abandoned = append(w.abandoned, abandonedSession{w.s, w.rec})
		}
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		w.r.closed(w.rec, w.s.Close(ctx))
		cancel()
	}
	w.s, w.rec = nil, nil
}

// finish ends the worker: releases, pending retries, and every session
// closed — except by the forget-close control, which walks away from its
// last session while holding a lock.
func (w *lockWorker) finish() {
	if w.control == reuseForgetClose && w.s != nil && w.s.Err() == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if _, err := w.s.TryAcquire(ctx, "forgotten"); err == nil || errors.Is(err, lock.ErrAlreadyClaimed) {
			w.r.mu.Lock()
			w.r.controlled = true
			w.r.mu.Unlock()
		}
		w.endAll()
		return
	}
	for _, name := range w.heldNames() {
		if h := w.held[name]; h != nil {
			w.release(h, 3*time.Second)
		}
	}
	for _, rt := range w.retries {
		w.retryRelease(rt.h)
	}
	w.retries = nil
	if w.s != nil {
		w.closeSession(false)
	}
	for _, a := range w.abandoned {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		w.r.closed(a.rec, a.s.Close(ctx))
		cancel()
	}
}

// holdFor draws how long to keep a lock: briefly, a while, or past the
// notice bound.
func (w *lockWorker) holdFor() time.Duration {
	if w.control == reuseIgnoreLost {
		// Long enough that the operator finds it held and deletes it.
		return time.Duration(2000+w.rng.IntN(1500)) * time.Millisecond
	}
	short, medium := 35, 65
	if w.tryBias == 100 {
		short, medium = 20, 40 // cron-like jobs mostly run for a while
	}
	switch k := w.rng.IntN(100); {
	case k < short:
		return time.Duration(w.rng.IntN(30)) * time.Millisecond
	case k < medium:
		return time.Duration(50+w.rng.IntN(350)) * time.Millisecond
	default:
		return time.Duration(1200+w.rng.IntN(1800)) * time.Millisecond
	}
}

// freeName draws a name this worker does not hold, keeping at most three.
func (w *lockWorker) freeName() (string, bool) {
	if len(w.held) >= 3 {
		return "", false
	}
	var free []string
	for _, n := range w.r.cfg.names {
		if w.held[n] == nil {
			free = append(free, n)
		}
	}
	if len(free) == 0 {
		return "", false
	}
	return free[w.rng.IntN(len(free))], true
}

func (w *lockWorker) heldNames() []string {
	names := make([]string, 0, len(w.held))
	for n := range w.held {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
