package lock

import (
	"context"
	"errors"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"

	"github.com/etcdlock/etcdlock/pkg/internal/backoff"
	"github.com/etcdlock/etcdlock/pkg/internal/rpccode"
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

// readTryTimeout bounds one try of a read that is retried (a waiter's,
// Follow's): a member that accepts the connection but does not answer
// (frozen, cut off from its leader) would otherwise hold the read for as
// long as it stays so.
const readTryTimeout = 5 * time.Second

// waitRead runs a waiter's read-only transaction of ops, for l. A read
// changes nothing, so it is safe to repeat whatever became of an earlier
// try: while etcd is unreachable, has no leader or sheds load (gRPC codes
// Unavailable — a broken connection, "leader changed", "request timed
// out" — and ResourceExhausted, "too many requests"), or does not answer a
// try within readTryTimeout, it is retried with jittered backoff up to
// 1 s until it succeeds, ctx ends or l ends.
// clientv3 retries a Get so, but never a Txn, and without this a
// connection that breaks under a waiter would end its Acquire with an
// error. ctx should be bound to l (Lock.bind), so that a try waiting for a
// connection ends with the session.
func (s *Session) waitRead(ctx context.Context, l *Lock, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	// Jittered, so that the waiters an election interrupted do not retry
	// in step.
	retry := backoff.Backoff{Min: 25 * time.Millisecond, Max: time.Second, Jitter: true}
	for {
		// One try gets readTryTimeout; the next goes to the client's
		// next endpoint.
		tctx, cancel := context.WithTimeout(ctx, readTryTimeout)
		resp, err := s.client.Txn(tctx).Then(ops...).Commit()
		cancel()
		if err == nil || ctx.Err() != nil || !retryableRead(err) && !errors.Is(err, context.DeadlineExceeded) {
			return resp, err
		}
		d := retry.Next()
		s.log.Debug("waiting: read failed, retrying", zap.String("name", l.name), zap.Duration("in", d), zap.Error(err))
		if err := l.pause(ctx, d); err != nil {
			return nil, err
		}
	}
}

// pause waits d on the real clock (it paces requests to etcd) for an
// acquisition of l running on ctx. It returns early with l's cause once l
// has ended, or with ctx.Err() once ctx has.
func (l *Lock) pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-l.ctx.Done():
		return context.Cause(l.ctx)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// retryableRead reports whether err, from a read, says etcd could not
// serve it now (gRPC code Unavailable or ResourceExhausted, as a status or
// as clientv3's typed error), so that trying again later is right.
func retryableRead(err error) bool {
	code := rpccode.Of(err)
	return code == codes.Unavailable || code == codes.ResourceExhausted
}

// unanswered reports whether err, from a request, says it got no answer
// from etcd — it ran out of time, or etcd could not serve it — rather than
// a refusal.
func unanswered(err error) bool {
	if code := rpccode.Of(err); retryableRead(err) || code == codes.DeadlineExceeded || code == codes.Canceled {
		return true
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// awaitWatch registers a watch on the session's stream with add, passing
// it the watch's fire, and waits for it to fire: nil for a deletion or a
// broken watch, ErrWatchRefused when etcd refused it, l's cause once l
// ended, ctx.Err() once ctx did. The watch is removed on return.
func (s *Session) awaitWatch(ctx context.Context, l *Lock, add func(fire func(error)) *watchmux.Watch) error {
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
