package lock

import (
	"context"
	"time"

	"github.com/etcdlock/etcdlock/pkg/internal/request"
	"github.com/etcdlock/etcdlock/pkg/internal/watchmux"
)

// ownWatchDelay is how long a held lock's key goes unwatched after the
// acquisition. Most locks are held briefly, and a lock released within the
// delay never costs etcd a watch to create and cancel. Nothing is missed:
// the watch starts at the acquisition's revision, so a deletion during the
// delay is reported once the watch is created and etcd has caught it up
// (its start revision is then in the past: up to another 100 ms, see
// watchmux.Mux.WatchFromNow). The lease deadline, not this watch, is what
// stops a holder before etcd can expire its lease.
const ownWatchDelay = 100 * time.Millisecond

// retryableRead reports whether err, from a read, says etcd could not
// serve it now (gRPC code Unavailable or ResourceExhausted, as a status or
// as clientv3's typed error), so that trying again later is right.
func retryableRead(err error) bool { return request.Retryable(err) }

// unanswered reports whether err, from a request, says it got no answer
// from etcd — it ran out of time, or etcd could not serve it — rather than
// a refusal.
func unanswered(err error) bool { return request.Unanswered(err) }

// awaitWatch registers a watch on the session's stream with add, passing
// it the watch's fire, and waits for it to fire: nil for a deletion or a
// broken watch, ErrWatchRefused when etcd refused it, l's cause once l
// ended, ctx.Err() once ctx did. The watch is removed on return.
func (l *Lock) awaitWatch(ctx context.Context, add func(fire func(error)) *watchmux.Watch) error {
	s := l.s
	fired := make(chan error, 1)
	w := add(func(err error) { fired <- err })
	defer s.mux.Remove(w)
	select {
	case err := <-fired:
		return refused(err)
	case <-l.ctx.Done():
		return context.Cause(l.ctx)
	case <-ctx.Done():
		return ctx.Err()
	}
}
