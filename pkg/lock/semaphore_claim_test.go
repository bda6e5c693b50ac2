package lock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/etcdlock/etcdlock/pkg/lock"
)

// A semaphore's holder that finds its name without any key claims slot 0
// in its first transaction: acquiring costs one request and releasing one
// more, as for a plain lock. A second holder, which finds the first, reads
// the name in that transaction and claims a free slot in a second: one
// request more. The
// requests are counted on the client, so no extra read or failed claim
// hides behind a fast machine.
func TestSemaphoreUncontendedRequests(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	var rpcs rpcCounter
	cli := countingClient(t, &rpcs)
	acquires := map[string]func(*lock.Session, string) (*lock.Lock, error){
		"Acquire": func(s *lock.Session, name string) (*lock.Lock, error) {
			return s.Acquire(ctx, name, lock.WithLimit(3))
		},
		"TryAcquire": func(s *lock.Session, name string) (*lock.Lock, error) {
			return s.TryAcquire(ctx, name, lock.WithLimit(3))
		},
	}
	for what, acquire := range acquires {
		t.Run(what, func(t *testing.T) {
			s, other := newSession(t, cli), newSession(t, client(t))
			requests := func() int64 { return rpcs.reads.Load() + rpcs.writes.Load() }
			for i, first := range []*lock.Lock{nil, mustAcquire(t, other, "second-"+what, acquire)} {
				name := "first-" + what
				want := int64(1) // the name is empty: queue and claim slot 0 at once
				if first != nil {
					name, want = first.Name(), 2 // queue, then claim a free slot
				}
				before := requests()
				l, err := acquire(s, name)
				if err != nil {
					t.Fatal(err)
				}
				if got := requests() - before; got != want {
					t.Errorf("holder %d: acquiring sent %d requests, want %d", i+1, got, want)
				}
				checkSlotKey(t, ctx, s, l)
				if first != nil && l.Slot() == first.Slot() {
					t.Errorf("both holders in slot %d", l.Slot())
				}
				before = requests()
				if err := l.Release(ctx); err != nil {
					t.Fatal(err)
				}
				if got := requests() - before; got != 1 {
					t.Errorf("holder %d: releasing sent %d requests, want 1", i+1, got)
				}
			}
		})
	}
}

// A semaphore's first transaction follows what the session's last
// acquisition of the name found. After a free name (or on a new session)
// it is a probe, whose Else only reads: the request carries its writes
// once. After a name with keys it queues in its Else, so a name contended
// at every acquisition costs no probe. Either still claims slot 0 when
// the name is free, and the claim costs no more requests than before.
func TestSemaphoreFirstTransactionFollowsTheName(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	var (
		rpcs  rpcCounter
		mu    sync.Mutex
		first *pb.TxnRequest // the first transaction since the step began
	)
	cli := interceptedClient(t, cluster.Endpoints(), func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if r, ok := req.(*pb.TxnRequest); ok {
			mu.Lock()
			if first == nil {
				first = r
			}
			mu.Unlock()
		}
		return rpcs.intercept(ctx, method, req, reply, cc, invoker, opts...)
	})
	s := newSession(t, cli)
	others := []*lock.Session{newSession(t, client(t)), newSession(t, client(t))}
	acquire := func(s *lock.Session) *lock.Lock {
		t.Helper()
		l, err := s.Acquire(ctx, "pool", lock.WithLimit(2))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	release := func(l *lock.Lock) {
		t.Helper()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// step runs s's acquisition (acq) and its release, and checks the
	// writes acquiring sent, the probes among them that found keys,
	// whether the first one was a probe, and that it sent from minReads
	// to maxReads reads.
	step := func(what string, acq func() *lock.Lock, writes, probes int64, probe bool, minReads, maxReads int64) {
		t.Helper()
		mu.Lock()
		first = nil
		mu.Unlock()
		w0, r0, p0 := rpcs.writes.Load(), rpcs.reads.Load(), rpcs.probes.Load()
		l := acq()
		w, r, p := rpcs.writes.Load()-w0, rpcs.reads.Load()-r0, rpcs.probes.Load()-p0
		mu.Lock()
		readOnlyElse := first != nil && elseOnlyReads(first)
		mu.Unlock()
		if w != writes || p != probes || readOnlyElse != probe || r < minReads || r > maxReads {
			t.Errorf("%s: %d writes, %d of them probes that found keys, first a probe: %v, %d reads; want %d, %d, %v, %d to %d reads",
				what, w, p, readOnlyElse, r, writes, probes, probe, minReads, maxReads)
		}
		release(l)
	}
	step("a free name", func() *lock.Lock { return acquire(s) }, 1, 0, true, 0, 0)
	held := acquire(others[0])
	step("a slot free beside a holder", func() *lock.Lock { return acquire(s) }, 2, 1, true, 0, 0)
	step("the same again", func() *lock.Lock { return acquire(s) }, 2, 0, false, 0, 0)
	release(held)
	step("free again", func() *lock.Lock { return acquire(s) }, 1, 0, false, 0, 0)
	step("free once more", func() *lock.Lock { return acquire(s) }, 1, 0, true, 0, 0)
	full := func() *lock.Lock {
		holders := []*lock.Lock{acquire(others[0]), acquire(others[1])}
		w := make(chan *lock.Lock, 1)
		go func() { w <- acquire(s) }()
		waitQueued(t, client(t), "pool", 3) // not on cli: its reads would count
		release(holders[0])
		l := <-w
		release(holders[1])
		return l
	}
	// Writes: the probe, the queueing, the claim. Reads: the waiter's,
	// once its watch is created, and once the events say it is eligible;
	// only the first when the release came before the watch was created,
	// so that the first read found it eligible.
	step("a full semaphore", full, 3, 1, true, 1, 2)
	step("full again", full, 2, 0, false, 1, 2)
}

func mustAcquire(t *testing.T, s *lock.Session, name string, acquire func(*lock.Session, string) (*lock.Lock, error)) *lock.Lock {
	t.Helper()
	l, err := acquire(s, name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// checkSlotKey fails t unless l, a holder of s, has its contender key
// and, as its Key, its slot key, created at its token.
func checkSlotKey(t *testing.T, ctx context.Context, s *lock.Session, l *lock.Lock) {
	t.Helper()
	contender := fmt.Sprintf("%s%x", namePrefix(t, prefix(t), l.Name()), int64(s.Lease()))
	resp, err := lock.ClientOf(s).Txn(ctx).Then(clientv3.OpGet(l.Key()), clientv3.OpGet(contender)).Commit()
	if err != nil {
		t.Fatal(err)
	}
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) != 1 || kvs[0].CreateRevision != int64(l.Token()) {
		t.Errorf("slot key %s: %v; want it created at the token %v", l.Key(), kvs, l.Token())
	}
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) != 1 {
		t.Errorf("contender key %s: %v; want it there", contender, kvs)
	}
}

// replyLost marks the requests whose replies loseReplies drops.
type replyLost struct{}

// loseReplies is a client interceptor that sends a Txn that lose picks,
// on a context marked with replyLost, to etcd, then drops etcd's reply
// and answers as etcd does a write whose outcome it cannot tell: "request
// timed out". applied receives whether etcd applied the transaction;
// after counts the transactions sent after it.
type loseReplies struct {
	lose    func(*pb.TxnRequest) bool
	applied chan bool
	lost    atomic.Bool
	after   atomic.Int32
}

func (lr *loseReplies) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	r, ok := req.(*pb.TxnRequest)
	if ok && lr.lost.Load() {
		lr.after.Add(1)
	}
	if !ok || ctx.Value(replyLost{}) == nil || !lr.lose(r) {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	if err := invoker(ctx, method, req, reply, cc, opts...); err != nil {
		return err
	}
	lr.lost.Store(true)
	lr.applied <- reply.(*pb.TxnResponse).Succeeded
	return rpctypes.ErrGRPCTimeout
}

// lossyClient is a client of the test cluster whose transactions that
// lose picks lose their replies (loseReplies) when sent on a context
// marked with replyLost.
func lossyClient(t *testing.T, lose func(*pb.TxnRequest) bool) (*clientv3.Client, *loseReplies) {
	t.Helper()
	lr := &loseReplies{lose: lose, applied: make(chan bool, 1)}
	return interceptedClient(t, cluster.Endpoints(), lr.intercept), lr
}

// A semaphore's first holder writes its contender key and its slot key in
// one transaction. When that transaction's reply is lost, the failed
// acquisition's clean-up deletes both keys (by the value it wrote), so the
// name is free at once, for the same session and for others.
func TestSemaphoreFirstHolderReplyLost(t *testing.T) {
	t.Parallel()
	acquires := map[string]func(context.Context, *lock.Session) (*lock.Lock, error){
		"Acquire": func(ctx context.Context, s *lock.Session) (*lock.Lock, error) {
			return s.Acquire(ctx, "pool", lock.WithLimit(2))
		},
		"TryAcquire": func(ctx context.Context, s *lock.Session) (*lock.Lock, error) {
			return s.TryAcquire(ctx, "pool", lock.WithLimit(2))
		},
	}
	for what, acquire := range acquires {
		t.Run(what, func(t *testing.T) {
			ctx := testCtx(t)
			cli, lr := lossyClient(t, txnWrites) // the first write is the first holder's
			s := newSession(t, cli)
			if _, err := acquire(context.WithValue(ctx, replyLost{}, true), s); !errors.Is(err, rpctypes.ErrTimeout) {
				t.Fatalf("%s without its reply = %v, want etcd's timeout", what, err)
			}
			if !<-lr.applied {
				t.Fatal("the first holder's transaction did not apply: the name was not empty")
			}
			if keys := keysUnder(t, cli, prefix(t)); len(keys) != 0 {
				t.Fatalf("keys left after the clean-up: %v, want none", keys)
			}
			// Both keys go in one transaction: a clean-up cut off after
			// its first request would leave a slot taken for a TTL.
			if n := lr.after.Load(); n != 1 {
				t.Errorf("the clean-up sent %d transactions, want 1", n)
			}
			for i, s := range []*lock.Session{s, newSession(t, client(t))} {
				l, err := acquire(ctx, s)
				if err != nil {
					t.Fatalf("holder %d after the lost reply: %v", i+1, err)
				}
				if l.Slot() != i {
					t.Errorf("holder %d got slot %d, want %d: a slot is still taken", i+1, l.Slot(), i)
				}
			}
		})
	}
}

// A semaphore's contender claims its slot in one of two transactions, and
// the failed acquisition's clean-up must delete the slot key and the
// contender key of either when its reply is lost, and leave the holders'
// keys alone: the transaction that follows the first one's read, which
// claims a free slot with the contender key when nothing changed since
// (If(...) Then(two puts) Else(the queueing transaction)); and the claim
// of a contender that queued and waited, If(its contender key is
// unchanged) Then(a single nested transaction: the slots it tries, one
// after another).
func TestSemaphoreClaimReplyLost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		wait bool // the semaphore is full: the contender queues and waits
		lose func(*pb.TxnRequest) bool
	}{
		{name: "after the read", lose: func(r *pb.TxnRequest) bool {
			return len(r.Success) == 2 && len(r.Failure) == 1 && r.Failure[0].GetRequestTxn() != nil
		}},
		{name: "after the wait", wait: true, lose: func(r *pb.TxnRequest) bool {
			return len(r.Compare) == 1 && len(r.Success) == 1 && r.Success[0].GetRequestTxn() != nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			cli, lr := lossyClient(t, tc.lose)
			holder, err := newSession(t, client(t)).Acquire(ctx, "pool", lock.WithLimit(2))
			if err != nil {
				t.Fatal(err)
			}
			s := newSession(t, cli)
			lost := func() error {
				_, err := s.Acquire(context.WithValue(ctx, replyLost{}, true), "pool", lock.WithLimit(2))
				return err
			}
			if tc.wait {
				second, err := newSession(t, client(t)).Acquire(ctx, "pool", lock.WithLimit(2))
				if err != nil {
					t.Fatal(err)
				}
				errc := make(chan error, 1)
				go func() { errc <- lost() }()
				waitQueued(t, cli, "pool", 3)
				if err := second.Release(ctx); err != nil {
					t.Fatal(err)
				}
				lost = func() error { return <-errc }
			}
			if err := lost(); !errors.Is(err, rpctypes.ErrTimeout) {
				t.Fatalf("Acquire without its claim's reply = %v, want etcd's timeout", err)
			}
			if !<-lr.applied {
				t.Fatal("the claim did not apply")
			}
			if keys := keysUnder(t, cli, prefix(t)); len(keys) != 2 {
				t.Fatalf("keys after the clean-up: %v, want the holder's two", keys)
			}
			l, err := s.Acquire(ctx, "pool", lock.WithLimit(2))
			if err != nil {
				t.Fatal(err)
			}
			if l.Slot() == holder.Slot() || holder.Err() != nil {
				t.Errorf("second holder in slot %d, first in %d and %v", l.Slot(), holder.Slot(), holder.Err())
			}
		})
	}
}

// Waiters that become eligible at one revision claim different slots
// without a failed claim: each tries first the free slot at its rank
// among the eligible contenders without a slot, then the others in the
// same transaction. The holders' keys are deleted in one transaction, so
// every waiter reads the same free slots.
func TestSemaphoreEligibleTogetherClaimOnce(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	const n = 4
	var deletes []clientv3.Op
	for range n {
		s := newSession(t, cli)
		l, err := s.Acquire(ctx, "pool", lock.WithLimit(n))
		if err != nil {
			t.Fatal(err)
		}
		contender := fmt.Sprintf("%s%x", namePrefix(t, prefix(t), "pool"), int64(s.Lease()))
		deletes = append(deletes, clientv3.OpDelete(contender), clientv3.OpDelete(l.Key()))
	}
	var rpcs rpcCounter
	counted := countingClient(t, &rpcs)
	var waiters []<-chan acquired
	for i := range n {
		waiters = append(waiters, queueWaiter(t, ctx, newSession(t, counted), "pool", n+i+1, lock.WithLimit(n)))
	}
	if _, err := cli.Txn(ctx).Then(deletes...).Commit(); err != nil {
		t.Fatal(err)
	}
	slots := map[int]bool{}
	for i, w := range waiters {
		l := mustReceive(t, w, "every holder's keys were deleted")
		if slots[l.Slot()] {
			t.Errorf("waiter %d got slot %d, which another waiter holds", i+1, l.Slot())
		}
		slots[l.Slot()] = true
	}
	if got := rpcs.failedClaims.Load(); got != 0 {
		t.Errorf("%d failed slot claims, want none", got)
	}
}
