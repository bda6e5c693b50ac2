package lock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"

	"github.com/etcdlock/etcdlock/pkg/lock"
)

// Claim: the key of a failed acquisition whose put lands after the
// acquisition's clean-up (a stray) is deleted by the renewal loop's
// sweeps, even when the first sweeps get no answer from etcd (a loaded
// etcd, or a loaded client, whose delete outlasts the sweep's time): a
// sweep without an answer does not count as one that looked and found no
// key.
func TestStraysOutlastSweepsWithoutAnAnswer(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	var (
		delayPuts  atomic.Bool // an acquiring put is sent 50 ms after its caller gave up
		dropSweeps atomic.Bool // a delete gets no answer
		puts       sync.WaitGroup
	)
	intercept := func(ictx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		r, ok := req.(*etcdserverpb.TxnRequest)
		switch {
		case !ok:
		case delayPuts.Load() && txnHas(r, isPut):
			puts.Go(func() {
				time.Sleep(50 * time.Millisecond) // the put in flight: the fault itself
				_ = invoker(context.Background(), method, req, reply, cc, opts...)
			})
			<-ictx.Done()
			return ictx.Err()
		case dropSweeps.Load() && txnHas(r, isDelete):
			return context.DeadlineExceeded
		}
		return invoker(ictx, method, req, reply, cc, opts...)
	}
	icli := interceptedClient(t, cluster.Endpoints(), intercept)
	var renewed renewals
	s := newSession(t, icli, quiet(), lock.WithTTL(3*time.Second), lock.WithRenewInterval(sweepEvery), renewed.option())

	delayPuts.Store(true)
	names := []string{"n0", "n1", "n2", "n3"}
	for _, name := range names {
		actx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		if _, err := s.Acquire(actx, name); err == nil {
			t.Fatalf("acquired %s, whose put was held back", name)
		}
		cancel()
	}
	delayPuts.Store(false)
	puts.Wait()
	if n := len(keysUnder(t, cli, prefix(t))); n != len(names) {
		t.Fatalf("%d keys after the late puts, want %d", n, len(names))
	}

	dropSweeps.Store(true)
	renewed.sweeps(t, 4) // more than the looks a stray gets
	dropSweeps.Store(false)
	renewed.sweeps(t, 2)
	if keys := keysUnder(t, cli, prefix(t)); len(keys) != 0 {
		t.Errorf("keys left by the failed acquisitions: %v", keys)
	}
}

// txnHas reports whether any operation of r, at any depth, satisfies f.
func txnHas(r *etcdserverpb.TxnRequest, f func(*etcdserverpb.RequestOp) bool) bool {
	for _, ops := range [][]*etcdserverpb.RequestOp{r.Success, r.Failure} {
		for _, op := range ops {
			if f(op) || (op.GetRequestTxn() != nil && txnHas(op.GetRequestTxn(), f)) {
				return true
			}
		}
	}
	return false
}

func isPut(op *etcdserverpb.RequestOp) bool    { return op.GetRequestPut() != nil }
func isDelete(op *etcdserverpb.RequestOp) bool { return op.GetRequestDeleteRange() != nil }
