package lock_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/clock"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/internal/keyspace"
	"github.com/etcdlock/etcdlock/pkg/lock"
	"github.com/etcdlock/etcdlock/pkg/lock/lockmetrics"
)

func TestAcquireReleaseLifecycle(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	s := newSession(t, cli)
	l, err := s.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, l.Key())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("key %s not in etcd: %v %v", l.Key(), resp, err)
	}
	if got, want := l.Token(), fencing.Token(resp.Kvs[0].CreateRevision); got != want {
		t.Errorf("Token() = %v, want key create revision %v", got, want)
	}
	if resp.Kvs[0].Lease != int64(s.Lease()) {
		t.Errorf("key lease = %x, want session lease %x", resp.Kvs[0].Lease, s.Lease())
	}
	if l.Err() != nil || l.Err() != nil || l.Context().Err() != nil {
		t.Fatalf("fresh lock: err %v ctx %v", l.Err(), l.Context().Err())
	}
	if l.Name() != "job" {
		t.Errorf("accessors: name %q", l.Name())
	}

	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(l.Err(), lock.ErrReleased) || !errors.Is(l.Err(), lock.ErrReleased) {
		t.Errorf("after release: err %v", l.Err())
	}
	if !errors.Is(context.Cause(l.Context()), lock.ErrReleased) {
		t.Errorf("context cause = %v, want ErrReleased", context.Cause(l.Context()))
	}
	if keys := keysUnder(t, cli, prefix(t)); len(keys) != 0 {
		t.Errorf("keys left after release: %v", keys)
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("second Release = %v, want nil", err)
	}
	// The name can be taken again; the new token is larger.
	l2, err := s.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if l2.Token() <= l.Token() {
		t.Errorf("re-acquired token %v not above %v", l2.Token(), l.Token())
	}
}

func TestAcquireIsFIFO(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	holder := newSession(t, cli)
	first, err := holder.Acquire(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	locks := make(chan *lock.Lock, n)
	for i := range n {
		s := newSession(t, cli)
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := s.Acquire(ctx, "q")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			locks <- l
		}()
		// Wait until waiter i has queued its key, so queue order is known.
		waitQueued(t, cli, "q", i+2)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var prev fencing.Token = first.Token()
	for range n {
		l := <-locks
		if l.Token() <= prev {
			t.Errorf("token %v not above previous holder's %v", l.Token(), prev)
		}
		prev = l.Token()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if diff := cmp.Diff([]int{0, 1, 2, 3, 4}, order); diff != "" {
		t.Errorf("acquisition order (-want +got):\n%s", diff)
	}
}

func TestMutualExclusionUnderContention(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	const workers, rounds = 4, 10
	var (
		mu     sync.Mutex
		inside int
		max    int
		tokens []fencing.Token
		wg     sync.WaitGroup
	)
	for range workers {
		s := newSession(t, cli)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				l, err := s.Acquire(ctx, "m")
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				inside++
				if inside > max {
					max = inside
				}
				tokens = append(tokens, l.Token())
				mu.Unlock()
				time.Sleep(time.Millisecond)
				mu.Lock()
				inside--
				mu.Unlock()
				if err := l.Release(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if max != 1 {
		t.Errorf("%d holders at once, want 1", max)
	}
	if len(tokens) != workers*rounds {
		t.Fatalf("%d acquisitions, want %d", len(tokens), workers*rounds)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Errorf("token %d = %v not above %v", i, tokens[i], tokens[i-1])
		}
	}
}

func TestTryAcquireOfABusyNameNamesItsHolderAndLeavesNoKey(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	a := newSession(t, cli, lock.WithOwner("alice"))
	b := newSession(t, cli, lock.WithOwner("bob"))
	la, err := a.TryAcquire(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.TryAcquire(ctx, "t")
	var locked *lock.LockedError
	if !errors.Is(err, lock.ErrLocked) || !errors.As(err, &locked) {
		t.Fatalf("TryAcquire on held name = %v, want *LockedError", err)
	}
	if locked.Owner != "alice" || locked.Token != la.Token() || locked.Key != la.Key() || locked.Name != "t" {
		t.Errorf("LockedError = %+v, want alice's key %s token %v", locked, la.Key(), la.Token())
	}
	if keys := keysUnder(t, cli, prefix(t)); len(keys) != 1 {
		t.Errorf("keys after failed TryAcquire: %v, want only the holder's", keys)
	}
	// A queued waiter also makes the name contended.
	w := newSession(t, cli)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	queueWaiter(t, wctx, w, "t", 2)
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	etcdtest.Eventually(t, 10*time.Second, func() bool {
		_, err := b.TryAcquire(ctx, "t")
		return errors.Is(err, lock.ErrLocked)
	}, "TryAcquire did not see the promoted waiter")
}

func TestSecondClaimOnSameName(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	s := newSession(t, cli)
	l, err := s.Acquire(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, "x"); !errors.Is(err, lock.ErrAlreadyClaimed) {
		t.Errorf("second Acquire = %v, want ErrAlreadyClaimed", err)
	}
	if _, err := s.TryAcquire(ctx, "x"); !errors.Is(err, lock.ErrAlreadyClaimed) {
		t.Errorf("TryAcquire while held = %v, want ErrAlreadyClaimed", err)
	}
	if l.Err() != nil {
		t.Errorf("first lock disturbed: %v", l.Err())
	}
	// Other names are independent.
	if _, err := s.Acquire(ctx, "y"); err != nil {
		t.Errorf("Acquire of another name: %v", err)
	}
}

func TestInvalidNames(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	s := newSession(t, cli)
	for _, name := range []string{"", "a\x00", "\x00"} {
		if _, err := s.Acquire(ctx, name); !errors.Is(err, lock.ErrInvalidName) {
			t.Errorf("Acquire(%q) = %v, want ErrInvalidName", name, err)
		}
		if _, err := s.TryAcquire(ctx, name); !errors.Is(err, lock.ErrInvalidName) {
			t.Errorf("TryAcquire(%q) = %v, want ErrInvalidName", name, err)
		}
	}
}

// A key of this session's lease is already under the name — an earlier
// attempt's reply was lost, or its release failed. A new Acquire must not
// adopt it (a token is never handed to two acquisitions): it replaces the
// key with a fresh one, which a compare-and-delete on the old token cannot
// touch. A semaphore's contender puts its key before it knows of the
// leftover when the name has another holder (slotHold.queue): it must
// still replace it, and hold its slot.
func TestLeftoverKeyIsReplacedNotAdopted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		try   bool
		opts  []lock.AcquireOption
		other bool // another session holds the name
	}{
		{name: "lock"},
		{name: "lock-try", try: true},
		{name: "semaphore", opts: []lock.AcquireOption{lock.WithLimit(2)}},
		{name: "semaphore-held", opts: []lock.AcquireOption{lock.WithLimit(2)}, other: true},
		{name: "semaphore-try-held", try: true, opts: []lock.AcquireOption{lock.WithLimit(2)}, other: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cli := testCtx(t), client(t)
			s := newSession(t, cli)
			var others []string
			if tc.other {
				o := mustAcquire(t, newSession(t, cli), "job", func(s *lock.Session, name string) (*lock.Lock, error) {
					return s.Acquire(ctx, name, tc.opts...)
				})
				others = keysUnder(t, cli, prefix(t))
				defer o.Release(ctx)
			}
			key := fmt.Sprintf("%sjob/%x", prefix(t), int64(s.Lease()))
			leftover := keyspace.Record{Owner: "leftover"} // an earlier acquisition of the same kind
			if tc.opts != nil {
				leftover.Limit = 2
			}
			put, err := cli.Put(ctx, key, leftover.Encode(), clientv3.WithLease(s.Lease()))
			if err != nil {
				t.Fatal(err)
			}
			acquire := s.Acquire
			if tc.try {
				acquire = s.TryAcquire
			}
			l, err := acquire(ctx, "job", tc.opts...)
			if err != nil {
				t.Fatalf("acquire: %v", err)
			}
			if (l.Key() != key && tc.opts == nil) || l.Token() <= fencing.Token(put.Header.Revision) {
				t.Errorf("got %s@%v, want %s with a token above the leftover's %d", l.Key(), l.Token(), key, put.Header.Revision)
			}
			// A semaphore's Key is its slot's; its contender key is key.
			get, err := cli.Get(ctx, key)
			if err != nil || len(get.Kvs) != 1 || get.Kvs[0].CreateRevision <= put.Header.Revision {
				t.Errorf("contender key %v (err %v), want one created after the leftover's %d", get.Kvs, err, put.Header.Revision)
			}
			// The other holder's keys, the new key, and a semaphore's slot.
			want := len(others) + 1 + min(len(tc.opts), 1)
			if keys := keysUnder(t, cli, prefix(t)); len(keys) != want {
				t.Errorf("keys = %v, want %d: the other holder's %v and the new ones", keys, want, others)
			}
			// The earlier attempt's clean-up, arriving late, changes nothing.
			del, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", put.Header.Revision)).
				Then(clientv3.OpDelete(key)).Commit()
			if err != nil || del.Succeeded {
				t.Errorf("compare-and-delete on the leftover's token: succeeded=%v err=%v, want no delete", del != nil && del.Succeeded, err)
			}
			if l.Err() != nil {
				t.Errorf("lock ended: %v", l.Err())
			}
			if err := l.Release(ctx); err != nil {
				t.Errorf("Release: %v", err)
			}
			if keys := keysUnder(t, cli, prefix(t)); len(keys) != len(others) {
				t.Errorf("keys after Release = %v, want the other holder's %v", keys, others)
			}
		})
	}
}

func TestCanceledAcquireRemovesItsKey(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	holder := newSession(t, cli)
	h, err := holder.Acquire(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	waiter := newSession(t, cli)
	wctx, cancel := context.WithCancel(ctx)
	res := queueWaiter(t, wctx, waiter, "c", 2)
	cancel()
	if err := (<-res).err; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled Acquire = %v, want context.Canceled", err)
	}
	if keys := keysUnder(t, cli, prefix(t)); len(keys) != 1 || keys[0] != h.Key() {
		t.Errorf("keys after cancel = %v, want only holder %s", keys, h.Key())
	}
	if h.Err() != nil {
		t.Errorf("holder state %v", h.Err())
	}
	// The claim is gone: the waiter's session can try again.
	if _, err := waiter.TryAcquire(ctx, "c"); !errors.Is(err, lock.ErrLocked) {
		t.Errorf("TryAcquire after cancel = %v, want ErrLocked", err)
	}
}

func TestWaiterAbortsWhenItsKeyIsDeleted(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	holder := newSession(t, cli)
	if _, err := holder.Acquire(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	waiter := newSession(t, cli)
	res := queueWaiter(t, ctx, waiter, "w", 2)
	wkey := fmt.Sprintf("%sw/%x", prefix(t), int64(waiter.Lease()))
	if _, err := cli.Delete(ctx, wkey); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-res:
		if !errors.Is(r.err, lock.ErrKeyDeleted) {
			t.Fatalf("Acquire = %v, want ErrKeyDeleted", r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waiter did not notice its key was deleted")
	}
}

func TestHolderLosesLockWhenKeyDeleted(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	s := newSession(t, cli)
	l, err := s.Acquire(ctx, "d")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Delete(ctx, l.Key()); err != nil {
		t.Fatal(err)
	}
	waitLost(t, l, lock.ErrKeyDeleted, 10*time.Second, "its key was deleted")
	if errors.Is(l.Err(), lock.ErrLeaseRevoked) || lockmetrics.LossReason(l.Err()) != "key_deleted" {
		t.Errorf("lock lost with %v (reason %q), want a delete only: the lease lives", l.Err(), lockmetrics.LossReason(l.Err()))
	}
	var lost *lock.LostError
	if !errors.Is(l.Err(), lock.ErrLost) || !errors.Is(l.Err(), lock.ErrLost) || !errors.Is(l.Err(), lock.ErrKeyDeleted) || !errors.As(l.Err(), &lost) {
		t.Errorf("err %v, want lost with ErrKeyDeleted", l.Err())
	}
	if l.Context().Err() == nil || !errors.Is(context.Cause(l.Context()), lock.ErrKeyDeleted) {
		t.Errorf("context cause %v", context.Cause(l.Context()))
	}
	// Releasing a lost lock is safe and successful.
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release of lost lock = %v", err)
	}
	if !errors.Is(l.Err(), lock.ErrLost) {
		t.Errorf("Release changed a lost lock to %v", l.Err())
	}
	// The session survives; the name can be acquired again with a new token.
	l2, err := s.Acquire(ctx, "d")
	if err != nil || l2.Token() <= l.Token() {
		t.Errorf("re-acquire: %v token %v", err, l2.Token())
	}
}

func TestRevokedLeaseLosesSessionAndLocks(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	s := newSession(t, cli, lock.WithTTL(3*time.Second))
	l, err := s.Acquire(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Revoke(ctx, s.Lease()); err != nil {
		t.Fatal(err)
	}
	waitLost(t, l, lock.ErrLeaseRevoked, 10*time.Second, "its lease was revoked")
	select {
	case <-s.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("session not lost after lease revoke")
	}
	if !errors.Is(s.Err(), lock.ErrSessionLost) || !errors.Is(s.Err(), lock.ErrLeaseRevoked) {
		t.Errorf("session err %v, want ErrSessionLost and ErrLeaseRevoked", s.Err())
	}
	// A revoke is told apart from a delete of the key and from an expiry.
	if errors.Is(l.Err(), lock.ErrKeyDeleted) || errors.Is(l.Err(), lock.ErrLeaseExpired) || lockmetrics.LossReason(l.Err()) != "lease_revoked" {
		t.Errorf("lock lost with %v (reason %q), want a revoke only", l.Err(), lockmetrics.LossReason(l.Err()))
	}
	if remaining(s, clock.Real()) != 0 {
		t.Errorf("Remaining() = %v after loss", remaining(s, clock.Real()))
	}
	if _, err := s.Acquire(ctx, "other"); !errors.Is(err, lock.ErrSessionLost) {
		t.Errorf("Acquire on lost session = %v", err)
	}
}

func TestCloseReleasesLocks(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	s := newSession(t, cli)
	l, err := s.Acquire(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(l.Err(), lock.ErrReleased) || l.Context().Err() == nil {
		t.Errorf("lock after Close: %v ctx %v", l.Err(), l.Context().Err())
	}
	if !errors.Is(s.Err(), lock.ErrSessionClosed) {
		t.Errorf("session err %v", s.Err())
	}
	if keys := keysUnder(t, cli, prefix(t)); len(keys) != 0 {
		t.Errorf("keys after Close: %v", keys)
	}
	if _, err := s.Acquire(ctx, "c"); !errors.Is(err, lock.ErrSessionClosed) {
		t.Errorf("Acquire after Close = %v", err)
	}
	if err := s.Close(ctx); err != nil {
		t.Errorf("second Close = %v", err)
	}
	// Nothing is left to do once the lease was revoked: no request, so
	// not even an ended ctx fails it.
	dead, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Close(dead); err != nil {
		t.Errorf("Close after a successful Close, on an ended ctx = %v", err)
	}
}

func TestCloseEndsAWaitingAcquireWithErrSessionClosed(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	holder := newSession(t, cli)
	if _, err := holder.Acquire(ctx, "z"); err != nil {
		t.Fatal(err)
	}
	s := newSession(t, cli)
	res := queueWaiter(t, ctx, s, "z", 2)
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := (<-res).err; !errors.Is(err, lock.ErrSessionClosed) {
		t.Errorf("Acquire interrupted by Close = %v, want ErrSessionClosed", err)
	}
}

// An Acquire that overlaps the previous lock's Release must not adopt the
// key being deleted: it waits for the Release and gets a fresh key.
func TestReacquireDuringReleaseGetsFreshKey(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	s := newSession(t, cli)
	l, err := s.Acquire(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		released := make(chan error, 1)
		go func() { released <- l.Release(ctx) }()
		for l.Err() == nil { // Release has begun: state first, delete next
			runtime.Gosched()
		}
		next, err := s.Acquire(ctx, "r")
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if err := <-released; err != nil {
			t.Fatal(err)
		}
		if next.Token() == l.Token() {
			t.Fatalf("round %d: re-acquire adopted the key being released (token %v)", i, l.Token())
		}
		if next.Err() != nil {
			t.Fatalf("round %d: new lock ended after the old release: %v", i, next.Err())
		}
		l = next
	}
}

// Abandon keeps a held lock's key until the lease expires; an Acquire
// still waiting returns ErrSessionClosed and removes its key, as any
// failed acquisition does: it held nothing.
func TestAbandonKeepsKeyUntilExpiry(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	s := newSession(t, cli, lock.WithTTL(2*time.Second))
	l, err := s.Acquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	other, err := newSession(t, cli).Acquire(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release(ctx)
	w := queueWaiter(t, ctx, s, "b", 2)
	s.Abandon()
	if !errors.Is(l.Err(), lock.ErrReleased) || l.Context().Err() == nil {
		t.Fatalf("after Abandon: %v", l.Err())
	}
	if err := mustReceiveErr(t, w); !errors.Is(err, lock.ErrSessionClosed) {
		t.Fatalf("the waiter's Acquire after Abandon = %v; want ErrSessionClosed", err)
	}
	if keys := keysUnder(t, cli, namePrefix(t, prefix(t), "a")); len(keys) != 1 {
		t.Fatalf("Abandon removed the held key: %v", keys)
	}
	if keys := keysUnder(t, cli, namePrefix(t, prefix(t), "b")); len(keys) != 1 || keys[0] != other.Key() {
		t.Fatalf("keys of b after Abandon: %v; want only the holder's, %s", keys, other.Key())
	}
	etcdtest.Eventually(t, 10*time.Second, func() bool { return len(keysUnder(t, cli, namePrefix(t, prefix(t), "a"))) == 0 }, "abandoned key never expired")
}

// stallKey marks the requests that timeoutFirst answers.
type stallKey struct{}

// timeoutFirst is a client interceptor that answers a Txn sent on a
// context marked with stallKey as etcd answers a write it could not finish
// by the deadline that traveled with it: once the context ends, with
// "etcdserver: request timed out". On a loaded machine that reply can
// beat the client's own deadline error; the interceptor makes it win
// every time. It sits below clientv3's own interceptor (retries, error
// mapping), where a server's reply arrives.
func timeoutFirst(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if method == "/etcdserverpb.KV/Txn" && ctx.Value(stallKey{}) != nil {
		<-ctx.Done()
		return rpctypes.ErrGRPCTimeout
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// An acquisition whose deadline passes with a write in flight returns
// ctx's error, as Acquire's doc promises, even when etcd's own timeout
// reply comes first; etcd's error stays in the chain. The negative
// control is the same call without the fix: it returned only etcd's
// "request timed out".
func TestAcquireReportsTheDeadlineWhenEtcdTimesOutFirst(t *testing.T) {
	t.Parallel()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   cluster.Endpoints(),
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(timeoutFirst)},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	ctx := testCtx(t)
	s := newSession(t, cli)
	acquires := map[string]func(context.Context, string) (*lock.Lock, error){
		"Acquire": func(ctx context.Context, name string) (*lock.Lock, error) { return s.Acquire(ctx, name) },
		"TryAcquire": func(ctx context.Context, name string) (*lock.Lock, error) {
			return s.TryAcquire(ctx, name)
		},
		"AcquireAll": func(ctx context.Context, name string) (*lock.Lock, error) {
			return s.AcquireAll(ctx, []string{name, name + "-2"})
		},
		"semaphore": func(ctx context.Context, name string) (*lock.Lock, error) {
			return s.Acquire(ctx, name, lock.WithLimit(2))
		},
	}
	for what, acquire := range acquires {
		t.Run(what, func(t *testing.T) {
			dctx, cancel := context.WithTimeout(context.WithValue(ctx, stallKey{}, true), 200*time.Millisecond)
			defer cancel()
			_, err := acquire(dctx, "deadline-"+what)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%s = %v, want context.DeadlineExceeded", what, err)
			}
			if !errors.Is(err, rpctypes.ErrTimeout) {
				t.Errorf("%s = %v: etcd's error is not in the chain", what, err)
			}
			// The claim is gone and nothing was left: the name can be
			// taken at once.
			l, err := acquire(ctx, "deadline-"+what)
			if err != nil {
				t.Fatalf("%s after the timeout: %v", what, err)
			}
			// Release too: its error matches ctx's, and the retry on a
			// fresh ctx succeeds.
			rctx, cancel := context.WithTimeout(context.WithValue(ctx, stallKey{}, true), 200*time.Millisecond)
			defer cancel()
			if err := l.Release(rctx); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, rpctypes.ErrTimeout) {
				t.Errorf("Release = %v, want context.DeadlineExceeded with etcd's error in the chain", err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestReleaseAfterAnOperatorDeletedOneOfTheKeys deletes one key of a held
// lock that holds several (a semaphore's slot, one name of an AcquireAll,
// a lock-delay's contender key) and releases it at once, before the
// holder's watch could see the delete: Release must still delete each of
// the other keys that is still the lock's, and leave a lock-delay's
// marker, which marks an unclean end.
func TestReleaseAfterAnOperatorDeletedOneOfTheKeys(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		acquire func(context.Context, *lock.Session) (*lock.Lock, error)
		left    int // keys Release must leave under the prefix
	}{
		{"semaphore", func(ctx context.Context, s *lock.Session) (*lock.Lock, error) {
			return s.Acquire(ctx, "pool", lock.WithLimit(3))
		}, 0},
		{"acquireall", func(ctx context.Context, s *lock.Session) (*lock.Lock, error) {
			return s.AcquireAll(ctx, []string{"a", "b", "c"})
		}, 0},
		{"lockdelay", func(ctx context.Context, s *lock.Session) (*lock.Lock, error) {
			return s.Acquire(ctx, "delayed", lock.WithLockDelay(2*time.Second))
		}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx, cli := testCtx(t), client(t)
			s := newSession(t, cli)
			l, err := c.acquire(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			before := keysUnder(t, cli, prefix(t))
			if _, err := cli.Delete(ctx, l.Key()); err != nil {
				t.Fatal(err)
			}
			// A Release that finds a key gone may report it (the lock
			// was lost); what it must do is delete the rest.
			_ = l.Release(ctx)
			if left := keysUnder(t, cli, prefix(t)); len(left) != c.left {
				t.Errorf("held %q; deleted %s and released: %q remain, want %d", before, l.Key(), left, c.left)
			}
		})
	}
}
