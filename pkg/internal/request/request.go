// Package request sends etcd requests that are safe to repeat, another
// try beside each that goes unanswered for its bound, so that a member
// that holds one unanswered does not hold the call: the next try goes to
// the client's next endpoint.
package request

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

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

// FirstTryTimeout is how long Do waits for an answer to its first try
// before it sends a second beside it, each later wait twice the one
// before: a frozen member, or one cut off from its leader, holds a request
// unanswered, and the next try goes to the client's next endpoint.
const FirstTryTimeout = time.Second

// Do sends a request — try, which must be safe to send again whatever
// became of an earlier try: idempotent, or guarded by a compare that makes
// a repeat a no-op — until etcd answers it. A try unanswered after its
// bound (FirstTryTimeout, then twice the last) is not given up: another is
// sent beside it, which the client's round-robin sends to its next
// endpoint, and the first answer wins. So a member that holds requests
// unanswered does not hold the call, and a slow network, whose answers
// take longer than a bound, still answers the first try. lost is called
// for each try sent beside an unanswered one: one of them may be applied
// after the call returned. An answer, even an error (etcd's "request timed
// out", "leader changed": an outcome unknown, which the caller reports as
// before), ends it. It stops at ctx's end, or DefaultTimeout after it
// started if ctx has no deadline; a deadline that passed without an
// answer is an error wrapping ErrUnavailable, the reason etcd did not
// answer, and ctx's error. The tries still in flight are canceled, and
// have returned, when Do returns.
func Do[T any](ctx context.Context, c *clientv3.Client, lost func(), try func(context.Context) (T, error)) (T, error) {
	var zero T
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	var (
		mu       sync.Mutex
		first    error // the first answer's error, once answered is closed
		resp     T
		answered = make(chan struct{})
		wg       sync.WaitGroup
	)
	tries, stop := context.WithCancel(ctx)
	defer func() { stop(); wg.Wait() }()
	send := func() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := try(tries)
			mu.Lock()
			defer mu.Unlock()
			select {
			case <-answered:
			default:
				resp, first = r, err
				close(answered)
			}
		}()
	}
	if len(c.Endpoints()) < 2 {
		// One endpoint: another try would go to the same member. The
		// first has until ctx ends.
		r, err := try(ctx)
		switch {
		case err == nil:
			return r, nil
		case ctx.Err() != nil:
			return zero, ended(ctx, c, err)
		}
		return zero, err
	}
	bound := FirstTryTimeout
	send()
	timer := time.NewTimer(bound)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			if lost != nil {
				lost()
			}
			bound *= 2
			timer.Reset(bound)
			send()
			continue
		case <-ctx.Done():
			// The tries end with ctx: the answer that came first, if
			// one came as ctx ended (etcd's own timeout, say), says
			// more than ctx's error alone.
			stop()
			wg.Wait()
		case <-answered:
		}
		mu.Lock()
		defer mu.Unlock()
		select {
		case <-answered:
		default:
			return zero, ended(ctx, c, ctx.Err())
		}
		switch {
		case first == nil:
			return resp, nil
		case ctx.Err() != nil:
			return zero, ended(ctx, c, first)
		}
		return zero, first // etcd's answer, or the client's own error
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
//
// A connection that is ready is not asked: the question would be one more
// request to a member that holds requests unanswered.
func whyUnanswered(ctx context.Context, c *clientv3.Client) string {
	if c.ActiveConnection().GetState() == connectivity.Ready {
		return "no answer from etcd (a member frozen, cut off or without a leader, or the network drops packets)"
	}
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

// CompareAndDelete deletes key if its create revision is still createRev,
// and reports whether it did; a repeat is a no-op.
func CompareAndDelete(ctx context.Context, c *clientv3.Client, key string, createRev int64) (bool, error) {
	resp, err := c.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", createRev)).
		Then(clientv3.OpDelete(key)).
		Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}
