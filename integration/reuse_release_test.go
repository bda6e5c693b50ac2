package integration

import (
	"context"
	"time"

	"github.com/etcdlock/etcdlock/pkg/holders"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// held is a lock a worker holds, with its grant (for a set, its first
// name's; more are the others').
type held struct {
	l    *lock.Lock
	g    *grant
	more []*grant
}

// grants are all of h's grants.
func (h *held) grants() []*grant { return append([]*grant{h.g}, h.more...) }

// pendingRelease is a Release that failed, to be tried again at due.
type pendingRelease struct {
	h   *held
	due time.Duration
}

// release gives h up on a context bounded by d; a failed release is
// retried later.
func (w *lockWorker) release(h *held, d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := w.releaseWith(ctx, h); err != nil {
		w.retries = append(w.retries, pendingRelease{h: h, due: w.r.now() + 100*time.Millisecond})
	}
}

// releaseWith records the release of h and calls Release on ctx (the
// release-by-name control then deletes the name's holder key).
func (w *lockWorker) releaseWith(ctx context.Context, h *held) error {
	for _, g := range h.grants() {
		w.r.ended(g, w.r.now(), h.l.Err(), w.control != reuseIgnoreLost)
		w.r.releasing(g, w.r.now())
		delete(w.held, g.name)
	}
	err := h.l.Release(ctx)
	if err == nil {
		w.r.releasedOK(h.grants()...)
	}
	if w.control == reuseReleaseByName && err == nil {
		// The broken release: delete whatever key holds the name. An
		// error leaves the control uncontrolled, which the run reports.
		time.Sleep(50 * time.Millisecond) // the next holder, if any, is active by then
		st, ierr := holders.Inspect(context.Background(), w.c.cli, w.r.prefix, h.g.name)
		if ierr == nil && st.Holder != nil {
			_, _ = w.c.cli.Delete(context.Background(), st.Holder.Key)
			w.r.mu.Lock()
			w.r.controlled = true
			w.r.mu.Unlock()
		}
	}
	return err
}

// badRelease releases a held lock on a canceled context or with a timeout
// of 1µs–5ms, retries a failed release later (documented as always safe)
// or now and then abandons the session instead, and usually acquires the
// same name again on the same session at once.
func (w *lockWorker) badRelease(h *held) {
	var rctx context.Context
	var cancel context.CancelFunc
	if w.rng.IntN(2) == 0 {
		rctx, cancel = context.WithCancel(context.Background())
		cancel()
	} else {
		rctx, cancel = context.WithTimeout(context.Background(), time.Duration(1+w.rng.IntN(5000))*time.Microsecond)
	}
	err := w.releaseWith(rctx, h)
	cancel()
	w.r.count("releases on expired contexts")
	if err != nil {
		w.r.count("releases on expired contexts that failed")
		w.retries = append(w.retries, pendingRelease{h: h, due: w.r.now() + time.Duration(20+w.rng.IntN(280))*time.Millisecond})
		if w.rng.IntN(5) == 0 {
			// The program gives up on its session before the retry: an
			// unclean end, whether or not it closes the session at once.
			w.r.count("sessions abandoned after a failed release")
			w.endAll()
			w.closeSession(true)
			return
		}
	}
	if w.rng.IntN(100) < 70 {
		w.r.count("re-acquisitions after an expired release")
		w.acquire(w.ctx, h.g.name, w.rng.IntN(100) < w.tryBias, 300*time.Millisecond, w.holdFor())
	}
}

// retryRelease calls Release again on a lock whose release failed.
func (w *lockWorker) retryRelease(h *held) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	w.r.count("release retries")
	if err := h.l.Release(ctx); err != nil {
		w.retries = append(w.retries, pendingRelease{h: h, due: w.r.now() + 100*time.Millisecond})
		return
	}
	w.r.releasedOK(h.grants()...)
}
