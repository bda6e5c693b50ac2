package lock_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/etcdlock/etcdlock/pkg/lock"
)

// leftoverFaults is a client whose acquiring puts can be held back past their
// callers' contexts (so they land after the clean-up: leftovers) and whose
// deletes can go unanswered.
type leftoverFaults struct {
	cli        *clientv3.Client
	putDelay   atomic.Int64 // nanoseconds; 0 sends puts as they come
	dropDelete atomic.Bool  // a transaction with a delete gets no answer
	puts       sync.WaitGroup
	landed     atomic.Int64 // late puts that etcd applied
}

func newLeftoverFaults(t *testing.T) *leftoverFaults {
	f := &leftoverFaults{}
	f.cli = interceptedClient(t, cluster.Endpoints(), func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		r, ok := req.(*etcdserverpb.TxnRequest)
		switch d := time.Duration(f.putDelay.Load()); {
		case !ok:
		case d > 0 && txnHas(r, isPut):
			f.puts.Go(func() {
				<-ctx.Done()
				time.Sleep(d) // the put in flight: the fault itself
				// Its own reply and no call options: the caller's, which
				// gave up, are its own again.
				late := &etcdserverpb.TxnResponse{}
				if invoker(context.Background(), method, req, late, cc) == nil && late.Succeeded {
					f.landed.Add(1)
				}
			})
			<-ctx.Done()
			return ctx.Err()
		case f.dropDelete.Load() && txnHas(r, isDelete):
			return context.DeadlineExceeded
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	return f
}

// leftovers makes failed acquisitions of names on s whose puts land d after
// their callers gave up, and returns once all have landed.
func (f *leftoverFaults) leftovers(t *testing.T, s *lock.Session, d time.Duration, names ...string) {
	t.Helper()
	f.putDelay.Store(int64(d))
	for _, name := range names {
		actx, cancel := context.WithTimeout(testCtx(t), 20*time.Millisecond)
		if _, err := s.Acquire(actx, name); err == nil {
			t.Fatalf("acquired %s, whose put was held back", name)
		}
		cancel()
	}
	f.putDelay.Store(0)
	f.puts.Wait()
}

// Claim: the key of a failed acquisition whose put lands after the
// acquisition's clean-up (a leftover) is deleted by the renewal loop's
// sweeps, even when the first sweeps get no answer from etcd (a loaded
// etcd, or a loaded client, whose delete outlasts the sweep's time): a
// sweep without an answer does not count as one that looked and found no
// key.
func TestLeftoversOutlastSweepsWithoutAnAnswer(t *testing.T) {
	t.Parallel()
	cli, f := client(t), newLeftoverFaults(t)
	var renewed renewals
	s := newSession(t, f.cli, quiet(), lock.WithTTL(3*time.Second), lock.WithRenewInterval(sweepEvery), renewed.option())
	names := []string{"n0", "n1", "n2", "n3"}
	// No delete is answered from before the clean-ups on (a sweep could
	// otherwise delete a key between its late put and the count below).
	f.dropDelete.Store(true)
	f.leftovers(t, s, 30*time.Millisecond, names...)
	if n := len(keysUnder(t, cli, prefix(t))); n != len(names) {
		t.Fatalf("%d keys after the late puts, want %d", n, len(names))
	}
	renewed.sweeps(t, 4) // more than the looks a leftover gets
	f.dropDelete.Store(false)
	renewed.sweeps(t, 2)
	if keys := keysUnder(t, cli, prefix(t)); len(keys) != 0 {
		t.Errorf("keys left by the failed acquisitions: %v", keys)
	}
}

// Claim: a leftover is looked for during at least a TTL, however short the
// renewal interval: a put that lands after three sweeps but within a TTL
// is deleted, not left to block the name for the session's life.
func TestLeftoversAreLookedForATTL(t *testing.T) {
	t.Parallel()
	cli, f := client(t), newLeftoverFaults(t)
	var renewed renewals
	s := newSession(t, f.cli, quiet(), lock.WithTTL(3*time.Second), lock.WithRenewInterval(sweepEvery), renewed.option())
	f.leftovers(t, s, 1500*time.Millisecond, "late") // six sweeps after its clean-up
	// Landed, as its reply says: a sweep may delete it before a read here.
	if n := f.landed.Load(); n != 1 {
		t.Fatalf("%d late puts landed, want 1", n)
	}
	renewed.sweeps(t, 2)
	if keys := keysUnder(t, cli, prefix(t)); len(keys) != 0 {
		t.Errorf("the late put's key is left: %v", keys)
	}
}

// Claim: the acquiring write of a failed acquisition that lands only
// after the session's next acquisition of the name holds writes nothing,
// whatever the kind: the next lock's key keeps its value (which a leftover
// sweep of the failed one's value must not match), and the lock stays
// active through the sweeps. A semaphore's contender with another holder
// present queues in the branch of its first transaction that does not
// claim slot 0.
func TestLeftoverLandingAfterTheNextAcquisition(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		opts  []lock.AcquireOption
		other bool // another session holds the name
	}{
		{name: "lock"},
		{name: "reader", opts: []lock.AcquireOption{lock.WithShared()}},
		{name: "semaphore", opts: []lock.AcquireOption{lock.WithLimit(2)}},
		{name: "semaphore-held", opts: []lock.AcquireOption{lock.WithLimit(2)}, other: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cli, f := testCtx(t), client(t), newLeftoverFaults(t)
			var renewed renewals
			s := newSession(t, f.cli, quiet(), lock.WithTTL(3*time.Second), lock.WithRenewInterval(sweepEvery), renewed.option())
			if tc.other {
				if _, err := newSession(t, cli, quiet()).Acquire(ctx, "n", tc.opts...); err != nil {
					t.Fatal(err)
				}
			}
			f.putDelay.Store(int64(time.Second)) // lands after the next acquisition
			actx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			_, err := s.Acquire(actx, "n", tc.opts...)
			cancel()
			if err == nil {
				t.Fatal("acquired, with its write held back")
			}
			f.putDelay.Store(0)
			l, err := s.Acquire(ctx, "n", tc.opts...)
			if err != nil {
				t.Fatalf("the next Acquire: %v", err)
			}
			key := fmt.Sprintf("%sn/%x", prefix(t), int64(s.Lease()))
			before, err := cli.Get(ctx, key)
			if err != nil || len(before.Kvs) != 1 {
				t.Fatalf("the next lock's key: %v, %v", before, err)
			}
			f.puts.Wait() // the held-back write has been sent, and answered
			after, err := cli.Get(ctx, key)
			if err != nil || len(after.Kvs) != 1 || after.Kvs[0].ModRevision != before.Kvs[0].ModRevision {
				t.Fatalf("the next lock's key after the late write: %v (err %v), want it unchanged at mod revision %d", after.Kvs, err, before.Kvs[0].ModRevision)
			}
			renewed.sweeps(t, 3)
			if err := l.Err(); err != nil {
				t.Errorf("the next lock ended after the sweeps: %v", err)
			}
		})
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
