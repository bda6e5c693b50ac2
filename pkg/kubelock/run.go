package kubelock

import "context"

// RunContext returns a context derived from parent for the work the
// elector's leader does beside client-go's callback — controller-runtime's
// Runnables, through manager.Options.BaseContext (package ctrlmanager sets
// it up). It stays live while the elector does not lead, and is canceled
// with the term's cause (context.Cause) when the first term under which
// the elector leads after this call ends: synchronously, before the lock
// sends any write that could let another candidate in, and so are the
// contexts derived from it with the context package's With functions.
// After that it stays canceled: an elector that leads again needs a new
// one, as each controller-runtime manager, which runs once, asks for its
// own.
func (l *Lock) RunContext(parent context.Context) context.Context {
	ctx, cancel := context.WithCancelCause(parent)
	l.mu.Lock()
	defer l.mu.Unlock()
	// Those whose parent ended (a manager that stopped before it led) are
	// dropped: a manager made again and again while it follows must not
	// grow the list.
	runs := l.runs[:0]
	for _, r := range l.runs {
		if r.ctx.Err() == nil {
			runs = append(runs, r)
		}
	}
	clear(l.runs[len(runs):])
	l.runs = append(runs, run{ctx, cancel})
	if l.leaders > 0 {
		l.armRunsLocked()
	}
	return ctx
}

// run is a RunContext waiting for the term it ends with.
type run struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// armRunsLocked binds the pending RunContexts to the term the elector
// leads under. l.mu is held.
func (l *Lock) armRunsLocked() {
	t := l.led
	if t == nil {
		return
	}
	for _, r := range l.runs {
		if t.ended.IsZero() {
			t.onEnd = append(t.onEnd, r.cancel)
		} else {
			r.cancel(context.Cause(t.ctx))
		}
	}
	l.runs = nil
}
