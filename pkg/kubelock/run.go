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
// one, as a controller-runtime manager, which runs once, does.
func (l *Lock) RunContext(parent context.Context) context.Context {
	ctx, cancel := context.WithCancelCause(parent)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs = append(l.runs, cancel)
	if l.leading {
		l.armRunsLocked()
	}
	return ctx
}

// armRunsLocked binds the pending RunContexts to the term the elector
// leads under. l.mu is held.
func (l *Lock) armRunsLocked() {
	t := l.led
	if t == nil {
		return
	}
	for _, cancel := range l.runs {
		if t.ended.IsZero() {
			t.onEnd = append(t.onEnd, cancel)
		} else {
			cancel(context.Cause(t.ctx))
		}
	}
	l.runs = nil
}
