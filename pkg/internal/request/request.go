// Package request sends etcd requests that are safe to repeat, each try
// bounded, so that a member that holds one unanswered does not hold the
// call: the next try goes to the client's next endpoint.
package request

import (
	"context"
	"errors"
	"fmt"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/etcdlock/etcdlock/pkg/internal/backoff"
	"github.com/etcdlock/etcdlock/pkg/internal/rpccode"
)

// ErrUnavailable: etcd did not answer a request before the call's
// deadline, or DefaultTimeout without one (pkg/lock's ErrUnavailable).
var ErrUnavailable = errors.New("lock: etcd unavailable")

// DefaultTimeout bounds a call whose ctx has no deadline while etcd does
// not answer (NewSession, Release, Close, Break and each write of an
// acquisition): it then fails with an error wrapping ErrUnavailable and
// context.DeadlineExceeded.
const DefaultTimeout = 10 * time.Second

// firstTryTimeout bounds the first try of a request the library sends
// again (Do), each later try twice the one before: a frozen member,
// or one cut off from its leader, holds a request unanswered, and the
// next try goes to the client's next endpoint; a healthy member slowed by
// load, or a large request, still gets a try long enough to be answered.
const FirstTryTimeout = time.Second

// Do sends a request — try, which must be safe to send again
// whatever became of an earlier try: idempotent, or guarded by a compare
// that makes a repeat a no-op — until etcd answers it, each try bounded
// (FirstTryTimeout, then twice the last), so that a member that
// holds it unanswered does not hold the call: the next try goes to the
// client's next endpoint, after a jittered backoff of up to 1 s. lost is
// called for each try given up so, which may still be applied later. An
// answer, even an error (etcd's "request timed out", "leader changed": an
// outcome unknown, which the caller reports as before), ends it. It stops
// at ctx's end, or DefaultTimeout after it started if ctx has no
// deadline; a deadline that passed without an answer is an error wrapping
// ErrUnavailable, the reason etcd did not answer, and ctx's error.
func Do[T any](ctx context.Context, c *clientv3.Client, lost func(), try func(context.Context) (T, error)) (T, error) {
	var zero T
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	retry := backoff.Backoff{Min: 25 * time.Millisecond, Max: time.Second, Jitter: true}
	bound := FirstTryTimeout
	for {
		tctx, cancel := context.WithTimeout(ctx, bound)
		resp, err := try(tctx)
		timedOut := tctx.Err() != nil // the try's own bound passed
		cancel()
		switch {
		case err == nil:
			return resp, nil
		case ctx.Err() != nil:
			return zero, ended(ctx, c, err)
		case !timedOut:
			return zero, err // etcd's answer, or the client's own error
		}
		if lost != nil {
			lost()
		}
		bound *= 2
		if backoff.Sleep(ctx, retry.Next()) != nil {
			return zero, ended(ctx, c, err)
		}
	}
}

// ended is the error of a request whose ctx ended while last, its last
// try's error, said it got no answer: unavailable if ctx's deadline
// passed, else last (the caller gave up).
func ended(ctx context.Context, c *clientv3.Client, last error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && Unanswered(last) {
		return unavailable(ctx, c, last)
	}
	return last
}

// unavailable is the error of a request that got no answer before ctx
// ended: last is the last try's error.
func unavailable(ctx context.Context, c *clientv3.Client, last error) error {
	if errors.Is(last, context.DeadlineExceeded) || errors.Is(last, context.Canceled) {
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, whyUnanswered(ctx, c), ctx.Err())
	}
	return fmt.Errorf("%w: %w: %w", ErrUnavailable, last, ctx.Err()) // etcd's answer says why
}

// reasonTimeout bounds whyUnanswered's question, asked once the caller's
// time is up: a connection that fails answers it at once, a member that
// holds requests unanswered never does.
const reasonTimeout = 100 * time.Millisecond

// whyUnanswered asks c's connection, without waiting for it to become
// ready as the client's own requests do, why they get no answer: gRPC's
// last connection error (refused, unknown host, a TLS handshake that
// failed), a member without a leader, or a member that accepts the
// request and does not answer it.
func whyUnanswered(ctx context.Context, c *clientv3.Client) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reasonTimeout)
	defer cancel()
	st, err := pb.NewMaintenanceClient(c.ActiveConnection()).Status(ctx, &pb.StatusRequest{})
	switch {
	case err == nil && st.Leader == 0:
		return "etcd has no leader (most members are down or cut off)"
	case err == nil:
		return "etcd answers, but not in time (overloaded, or a member frozen or cut off)"
	case ctx.Err() != nil:
		return "no answer from etcd (a member frozen or cut off, or the network drops packets)"
	}
	if s, ok := status.FromError(err); ok {
		return s.Message()
	}
	return err.Error()
}

// Retryable reports whether err says etcd could not serve a request now
// (unavailable, or out of resources): a read may be sent again.
func Retryable(err error) bool {
	code := rpccode.Of(err)
	return code == codes.Unavailable || code == codes.ResourceExhausted
}

// Unanswered reports whether err, from a request, says it got no answer
// from etcd — it ran out of time, or etcd could not serve it — rather than
// a refusal.
func Unanswered(err error) bool {
	if code := rpccode.Of(err); Retryable(err) || code == codes.DeadlineExceeded || code == codes.Canceled {
		return true
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}
