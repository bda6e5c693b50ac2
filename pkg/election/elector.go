package election

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/clock"
	"github.com/etcdlock/etcdlock/pkg/internal/backoff"
	"github.com/etcdlock/etcdlock/pkg/internal/watchmux"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// ErrRunning is returned by Run when the Elector is already running.
var ErrRunning = errors.New("election: already running")

// cleanupTimeout bounds each clean-up the elector runs on a fresh context,
// because the context it would otherwise use may have ended: a resign
// (Lock.Release), the delete of a term's tenure key and the close of a
// session (Session.Close, which revokes its lease). It is lock's default
// (lock.WithCleanupTimeout), so that the elector's clean-ups and its
// session's are bounded alike. A
// clean-up cut short only delays the handover: the leader key and the
// tenure key still go away when their leases expire.
const cleanupTimeout = 5 * time.Second

// Term is one period of leadership.
type Term struct {
	Name     string
	Identity string
	// Token fences the leader's writes: it is strictly larger than the
	// token of every earlier term of this election.
	Token   fencing.Token
	Key     string    // the leader key in etcd
	Started time.Time // when the term began (after any wait for an earlier term's tenure key): GetLeader's Since
	lock    *lock.Lock
	session *lock.Session   // the lock's
	tenure  *tenure         // nil for an elector without tenure keys
	clock   clock.Clock     // the session's, on which Deadline is a time
	ctx     context.Context // the term's: ended, the term is over
}

// Deadline returns the term's conservative deadline: the term is valid
// only before it. It is the earlier of the lease's deadline, which every
// successful renewal moves forward, and the term's own, which every
// successful proof of its keys moves forward (see the package doc).
func (t Term) Deadline() time.Time {
	d := t.session.Deadline()
	if t.tenure != nil {
		if c := t.tenure.Deadline(); c.Before(d) {
			return c
		}
	}
	return d
}

// Elector campaigns for one election. Create it with New and call Run.
type Elector struct {
	cfg     Config
	session session // what its lock.SessionOptions set
	metrics Metrics // cfg.Metrics, or a no-op
	running atomic.Bool

	mu   sync.Mutex
	term *Term // current term, nil when not leading
}

// New validates cfg and opts, the options of every term's session, and
// fills in defaults. It rejects lock.WithLockDelay (the election waits
// after an unclean end on its own) and, with Config.Metrics,
// lock.WithMetrics.
func New(cfg Config, opts ...lock.SessionOption) (*Elector, error) {
	s, err := cfg.validate(opts)
	if err != nil {
		return nil, err
	}
	e := &Elector{cfg: cfg, session: s, metrics: cfg.Metrics}
	if e.metrics == nil {
		e.metrics = nopMetrics{}
	}
	return e, nil
}

// Identity returns this candidate's identity.
func (e *Elector) Identity() string { return e.session.identity }

// IsLeader reports whether this Elector leads: a term has started and its
// context has not ended.
func (e *Elector) IsLeader() bool { return e.Term() != nil }

// Term returns the current term, or nil when not leading. A term whose
// context has ended is not current, even while OnStartedLeading has not
// returned: the next leader may have started.
func (e *Elector) Term() *Term {
	t := e.started()
	if t == nil || t.ctx.Err() != nil {
		return nil
	}
	return t
}

// started returns the term whose OnStartedLeading has been called and has
// not returned, or nil.
func (e *Elector) started() *Term {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.term
}

// Run campaigns until ctx ends, running a term each time it wins, and
// campaigns again after every term. It retries etcd errors with backoff. It
// returns nil once ctx has ended and the last term's callbacks have
// returned, or ErrRunning if Run is already running.
func (e *Elector) Run(ctx context.Context) error {
	if !e.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer e.running.Store(false)
	log := e.session.logger.With(zap.String("election", e.cfg.Name), zap.String("identity", e.session.identity))

	var wg sync.WaitGroup
	obsCtx, stopObs := context.WithCancel(ctx)
	defer func() { stopObs(); wg.Wait() }()
	// The watches of earlier terms' tenure keys: a stream only while a
	// term waits for one.
	mux := watchmux.ForClient(e.cfg.Client, log)
	wg.Add(1)
	go func() {
		defer wg.Done()
		mux.Run(obsCtx)
	}()
	if e.cfg.Callbacks.OnNewLeader != nil {
		leaders, err := Observe(obsCtx, e.cfg.Client, e.session.prefix, e.cfg.Name)
		if err != nil {
			return err // not reached: New validated the name and prefix
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := ""
			for l := range leaders {
				if l.Identity != "" && l.Identity != last {
					last = l.Identity
					e.cfg.Callbacks.OnNewLeader(l.Identity)
				}
			}
		}()
	}

	// The deletes of ended terms' tenure keys: they may outlast their
	// term, beside the session's clean-up and the next campaign.
	var drops sync.WaitGroup
	defer drops.Wait()
	var s *lock.Session
	keepLease := false
	defer func() {
		if s == nil || keepLease {
			return
		}
		cctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		_ = s.Close(cctx)
	}()
	retry := backoff.Backoff{Min: e.cfg.RetryMin, Max: e.cfg.RetryMax}
	for ctx.Err() == nil {
		if s == nil || s.Err() != nil {
			if s != nil {
				cctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
				_ = s.Close(cctx)
				cancel()
			}
			var err error
			s, err = lock.NewSession(ctx, e.cfg.Client, e.session.options(log)...)
			if err != nil {
				s = nil
				if ctx.Err() == nil {
					d := retry.Next()
					log.Warn("cannot start a session; retrying", zap.Error(err), zap.Duration("backoff", d))
					_ = backoff.Sleep(ctx, d)
				}
				continue
			}
		}
		l, err := s.Acquire(ctx, e.cfg.Name)
		if err != nil {
			if ctx.Err() == nil {
				d := retry.Next()
				log.Warn("campaign failed; retrying", zap.Error(err), zap.Duration("backoff", d))
				_ = backoff.Sleep(ctx, d)
			}
			continue
		}
		retry.Reset()
		keepLease = e.lead(ctx, s, l, mux, &drops, log)
		if ctx.Err() == nil && errors.Is(l.Err(), lock.ErrKeyDeleted) {
			// Someone deleted the leader key (holders.Force, an
			// operator's delete), and may revoke the session's lease
			// next, which would end a term won on it meanwhile: two
			// losses for one break. The next campaign takes a new lease.
			cctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
			_ = s.Close(cctx)
			cancel()
			s = nil
		}
	}
	return nil
}

// lead runs one term of l, won on session s, and reports whether the lease
// must be left to expire (Run's context ended without ReleaseOnCancel).
// The term starts once its tenure key is written and every earlier term's
// is gone, watched on mux. The delete of its tenure key joins drops.
func (e *Elector) lead(ctx context.Context, s *lock.Session, l *lock.Lock, mux *watchmux.Mux, drops *sync.WaitGroup, log *zap.Logger) (keepLease bool) {
	termCtx, endTerm := context.WithCancelCause(l.Context())
	var t *tenure
	var wg sync.WaitGroup // the tenure's keeper
	defer func() {
		endTerm(nil) // the keeper returns once the term ends
		wg.Wait()
	}()
	// finish ends the term's context, then deletes the tenure key — the
	// next leader may start — and, if release, the leader key, at once.
	finish := func(release bool) {
		endTerm(nil)
		if t != nil {
			drops.Add(1)
			go func() {
				defer drops.Done()
				t.drop()
			}()
		}
		if release {
			e.release(l, log)
		}
	}
	// stop ends the term because Run's context ended.
	stop := func() (keepLease bool) {
		if e.cfg.ReleaseOnCancel {
			finish(true)
			return false
		}
		endTerm(nil)
		s.Abandon() // the tenure key expires with its lease
		return true
	}
	started := time.Now()
	if !e.cfg.noTenure {
		t = newTenure(&e.cfg, e.session, s, l, log)
		others, err := t.claim(ctx, started)
		if err == nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t.keep(termCtx, endTerm)
			}()
			if len(others) > 0 {
				log.Info("an earlier term ended without releasing: waiting until its tenure key is gone", zap.Int("keys", len(others)))
				// Not begun while it waits: the key says so before the
				// others can go, and says when once they went. The marks
				// end with Run's context or the term's.
				mctx, cancel := context.WithCancel(termCtx)
				stopMarks := context.AfterFunc(ctx, cancel)
				if err = t.mark(mctx, time.Time{}); err == nil {
					err = t.awaitOthers(ctx, termCtx, mux, others)
				}
				if started = time.Now(); err == nil {
					err = t.mark(mctx, started)
				}
				stopMarks()
				cancel()
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return stop()
			}
			log.Warn("the term ended before it started", zap.Error(err))
			finish(l.Err() == nil) // a clean end: the term never started
			return false
		}
	}
	term := &Term{Name: e.cfg.Name, Identity: e.session.identity, Token: l.Token(), Key: l.Key(), Started: started, lock: l, session: s, tenure: t, clock: e.session.clock, ctx: termCtx}
	e.mu.Lock()
	e.term = term
	e.mu.Unlock()
	e.metrics.StartedLeading()
	log.Info("started leading", zap.Stringer("token", term.Token))

	done := make(chan struct{})
	go func() {
		defer close(done)
		e.cfg.Callbacks.OnStartedLeading(termCtx, *term)
	}()
	select {
	case <-done:
		log.Info("OnStartedLeading returned while leading: resigning")
		finish(true)
	case <-termCtx.Done():
		// Lost, resigned, or past the term's own deadline while the lock
		// still holds: then a clean end, now that the context has ended.
		finish(l.Err() == nil)
	case <-ctx.Done():
		keepLease = stop()
	}
	<-done
	lost := termLost(termCtx, l)
	if lost != nil {
		log.Warn("lost leadership", zap.Error(lost))
	}
	e.mu.Lock()
	e.term = nil
	e.mu.Unlock()
	e.metrics.StoppedLeading(lost)
	if e.cfg.Callbacks.OnStoppedLeading != nil {
		e.cfg.Callbacks.OnStoppedLeading()
	}
	log.Info("stopped leading", zap.Stringer("token", term.Token))
	return keepLease
}

// release resigns l on a fresh context bounded by cleanupTimeout.
func (e *Elector) release(l *lock.Lock, log *zap.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if err := l.Release(ctx); err != nil {
		log.Warn("resign failed; the lease will expire", zap.Error(err))
	}
}

// Resign ends the current term, if any: the leader key is deleted with a
// compare-and-delete so the next candidate takes over at once, and
// OnStartedLeading's context is canceled. The elector then campaigns again
// (cancel Run's context to stop campaigning). Resign without a term does
// nothing. Resign ends the term current when it is called: a Resign that
// failed still ended its term, so retrying it would end the next term,
// whose token is new — check Term first if that is not what you want.
func (e *Elector) Resign(ctx context.Context) error {
	t := e.Term()
	if t == nil {
		return nil
	}
	return t.lock.Release(ctx)
}
