package lock_test

// WithLockDelay at the edges of a clean and an unclean end: a stale
// holder's Release, a loss the session's watch has not seen yet, short
// TryAcquire timeouts and a failed Release before a clean Close.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/holders"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

const uncleanDelay = 1500 * time.Millisecond

// delayedHolder acquires "job" on a new session of cli with the lock-delay
// uncleanDelay and opts.
func delayedHolder(t *testing.T, cli *clientv3.Client, opts ...lock.SessionOption) (*lock.Session, *lock.Lock) {
	t.Helper()
	s := newSession(t, cli, append([]lock.SessionOption{lock.WithLockDelay(uncleanDelay)}, opts...)...)
	l, err := s.Acquire(testCtx(t), "job")
	if err != nil {
		t.Fatal(err)
	}
	return s, l
}

// nextHolderWaits acquires name on a fresh session with the delay and
// fails t unless it became active at least uncleanDelay after gone.
func nextHolderWaits(t *testing.T, s *lock.Session, name string, gone time.Time, end string) {
	t.Helper()
	ctx := testCtx(t)
	l2, err := s.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Release(ctx)
	if took := time.Since(gone); took < uncleanDelay-100*time.Millisecond {
		t.Errorf("after %s the next holder was ACTIVE %v after the previous holder's key was deleted, want >= lock-delay %v", end, took, uncleanDelay)
	}
}

// TestLockDelayReleaseAfterUncleanEndKeepsMarker: a holder whose end was
// unclean (its key deleted by an operator, Break, its session abandoned)
// and that then calls Release — the usual `defer l.Release(ctx)` — must
// not delete its marker: the next holder still waits.
func TestLockDelayReleaseAfterUncleanEndKeepsMarker(t *testing.T) {
	t.Parallel()
	for _, end := range []string{"operator-delete", "break", "abandon"} {
		t.Run(end, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			cli, watched := watchedClient(t)
			s1 := newSession(t, cli, lock.WithLockDelay(uncleanDelay))
			l1 := acquireWatched(t, s1, watched, "job")
			gone := deletedAt(t, cli, l1.Key())
			switch end {
			case "operator-delete":
				deleteAndLose(t, cli, l1)
			case "break":
				if _, err := holders.Force(ctx, cli, prefix(t), "job", l1.Token()); err != nil {
					t.Fatal(err)
				}
				waitLost(t, l1, nil, 20*time.Second, "it was broken")
			case "abandon":
				s1.Abandon()
			}
			// The stale holder notices and releases, as any defer does.
			if err := l1.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if ms := delayMarkers(t, client(t), "job"); len(ms) == 0 {
				t.Errorf("after an unclean end (%s) and a Release of the dead lock, no marker is left", end)
			}
			var at time.Time
			select {
			case at = <-gone:
			case <-time.After(10 * time.Second):
				t.Fatal("the key never went")
			}
			s2 := newSession(t, cli, lock.WithLockDelay(uncleanDelay))
			nextHolderWaits(t, s2, "job", at, end+" then Release")
		})
	}
}

// TestLockDelayOwnLossCountsAfterRelease: "a session's own earlier
// acquisition lost uncleanly counts", even when the lost Lock was
// Released first.
func TestLockDelayOwnLossCountsAfterRelease(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	cli, watched := watchedClient(t)
	s := newSession(t, cli, lock.WithLockDelay(uncleanDelay))
	l := acquireWatched(t, s, watched, "job")
	gone := time.Now()
	deleteAndLose(t, cli, l)
	_ = l.Release(ctx)
	nextHolderWaits(t, s, "job", gone, "own loss then Release")
}

// TestLockDelayCloseAfterUnseenDeleteKeepsMarker: a key deleted by an
// operator (or Break) just before Close, before the session's watch saw
// it, is an unclean end: Close must leave its marker.
func TestLockDelayCloseAfterUnseenDeleteKeepsMarker(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	s1, l1 := delayedHolder(t, cli)
	gone := time.Now()
	// Within ownWatchDelay of the acquisition: the loss is not seen yet.
	if _, err := cli.Delete(ctx, l1.Key()); err != nil {
		t.Fatal(err)
	}
	if err := s1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	s2 := newSession(t, cli, lock.WithLockDelay(uncleanDelay))
	nextHolderWaits(t, s2, "job", gone, "key deleted then Close")
}

// TestLockDelayShortTryAcquiresSucceedOnceItPassed: TryAcquire waits the delay on
// its ctx; tries with a ctx shorter than the delay must still get the
// name once the delay, started by the first of them, has passed — not
// restart it at every try and fail forever.
func TestLockDelayShortTryAcquiresSucceedOnceItPassed(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	cli, watched := watchedClient(t)
	s1 := newSession(t, cli, lock.WithLockDelay(uncleanDelay))
	l1 := acquireWatched(t, s1, watched, "job")
	deleteAndLose(t, cli, l1)
	s2 := newSession(t, cli, lock.WithLockDelay(uncleanDelay))
	// Stands for --command-timeout: below the delay as etcd times it (whole
	// seconds, at least 2 s), with room for a loaded machine.
	const requestTimeout = time.Second
	for i := range 4 {
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		l2, err := s2.TryAcquire(rctx, "job")
		cancel()
		if err == nil {
			_ = l2.Release(ctx)
			return
		}
		t.Logf("try %d: %v (markers %v)", i, err, delayMarkers(t, client(t), "job"))
		time.Sleep(uncleanDelay)
	}
	t.Errorf("TryAcquire with a request timeout below the lock-delay never succeeds on a free name, long after the unclean end")
}

// TestLockDelayFailedReleaseThenCloseIsClean: a clean end must not be
// taken for an unclean one: Release fails (ctx already done: a common
// `defer l.Release(reqCtx)`), then Close succeeds; Close deletes the
// marker too, and the next holder does not wait.
func TestLockDelayFailedReleaseThenCloseIsClean(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	s1, l1 := delayedHolder(t, cli)
	dead, cancel := context.WithCancel(ctx)
	cancel()
	if err := l1.Release(dead); err == nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("Release on a canceled ctx = %v", err)
	}
	if err := s1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if ms := delayMarkers(t, client(t), "job"); len(ms) != 0 {
		t.Errorf("markers left after Release (failed) and a successful Close: %v", ms)
	}
	s2 := newSession(t, cli, lock.WithLockDelay(uncleanDelay))
	from, err := cli.Get(ctx, "a-key-nobody-writes")
	if err != nil {
		t.Fatal(err)
	}
	l2, err := s2.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Release(ctx)
	if ds := delayWrites(t, ctx, cli, from.Header.Revision); len(ds) != 0 {
		t.Errorf("after a clean Close the next holder started a delay: %v", ds)
	}
}

// delayWrites lists the writes of lock-delay timers and records under the
// test's prefix after revision from, up to a last write of its own.
func delayWrites(t *testing.T, ctx context.Context, cli *clientv3.Client, from int64) []string {
	t.Helper()
	end := prefix(t) + "end"
	if _, err := cli.Put(ctx, end, ""); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if _, err := cli.Delete(ctx, end); err != nil {
			t.Error(err)
		}
	}()
	var ds []string
	for resp := range cli.Watch(ctx, prefix(t), clientv3.WithPrefix(), clientv3.WithRev(from+1)) {
		if err := resp.Err(); err != nil {
			t.Fatal(err)
		}
		for _, ev := range resp.Events {
			k := string(ev.Kv.Key)
			if strings.Contains(k, "%delay/") || strings.Contains(k, "%delayed/") {
				ds = append(ds, fmt.Sprintf("%s %s", ev.Type, k))
			}
			if k == end {
				return ds
			}
		}
	}
	t.Fatal("the watch ended before the test's last write")
	return nil
}

// TestLockDelayFailedReleaseThenAbandonIsUnclean: Release fails, then the
// session is abandoned — an unclean end, whatever follows: Close, a
// Release, or nothing. The next holder waits the delay from the key's
// deletion (Close's revoke, or the lease's expiry).
func TestLockDelayFailedReleaseThenAbandonIsUnclean(t *testing.T) {
	t.Parallel()
	for name, after := range map[string]func(ctx context.Context, s *lock.Session, l *lock.Lock) error{
		"close": func(ctx context.Context, s *lock.Session, _ *lock.Lock) error { return s.Close(ctx) },
		"release-close": func(ctx context.Context, s *lock.Session, l *lock.Lock) error {
			_ = l.Release(ctx)
			return s.Close(ctx)
		},
		"nothing": func(context.Context, *lock.Session, *lock.Lock) error { return nil },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cli := testCtx(t), client(t)
			s1, l1 := delayedHolder(t, cli, lock.WithTTL(2*time.Second))
			gone := deletedAt(t, cli, l1.Key())
			dead, cancel := context.WithCancel(ctx)
			cancel()
			if err := l1.Release(dead); !errors.Is(err, context.Canceled) {
				t.Fatalf("Release on a canceled ctx = %v", err)
			}
			s1.Abandon()
			if err := after(ctx, s1, l1); err != nil {
				t.Fatal(err)
			}
			var at time.Time
			select {
			case at = <-gone:
			case <-time.After(30 * time.Second):
				t.Fatal("the abandoned holder's key never went")
			}
			nextHolderWaits(t, newSession(t, cli, lock.WithLockDelay(uncleanDelay)), "job", at, "a failed Release, Abandon, then "+name)
		})
	}
}

// TestLockDelayWaitedOutByAnotherIsNotStartedAgain: a contender that read
// an unclean end's markers, which are then deleted — as a contender that
// waited the delay out deletes them, its delete landing late — owes no
// delay: it starts no second one, and leaves no record of one behind.
func TestLockDelayWaitedOutByAnotherIsNotStartedAgain(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	_, l1 := delayedHolder(t, cli)
	deleteAndLose(t, cli, l1) // an unclean end: its marker stays
	ended := delayMarkers(t, cli, "job")
	if len(ended) != 1 {
		t.Fatalf("markers after the unclean end: %v, want 1", ended)
	}
	// The next contender's client deletes the end's marker as soon as the
	// contender's marker write, which read it, returns.
	var once sync.Once
	clearEnd := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if r, ok := req.(*etcdserverpb.TxnRequest); ok && err == nil && writesMarker(r) {
			once.Do(func() {
				if _, err := cli.Delete(context.Background(), ended[0]); err != nil {
					t.Error(err)
				}
			})
		}
		return err
	}
	bcli, _ := watchedClientOf(t, cluster.Endpoints(), grpc.WithChainUnaryInterceptor(clearEnd))
	from, err := cli.Get(ctx, "a-key-nobody-writes")
	if err != nil {
		t.Fatal(err)
	}
	l2, err := newSession(t, bcli, lock.WithLockDelay(uncleanDelay)).Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if ds := delayWrites(t, ctx, cli, from.Header.Revision); len(ds) != 0 {
		t.Errorf("a delay was started for an end already waited out: %v", ds)
	}
	if keys := keysUnder(t, cli, prefix(t)); len(keys) != 0 {
		t.Errorf("keys left after the holder released: %v", keys)
	}
}

// writesMarker reports whether r writes a lock-delay marker.
func writesMarker(r *etcdserverpb.TxnRequest) bool {
	for _, op := range r.Success {
		if p := op.GetRequestPut(); p != nil && strings.Contains(string(p.Key), "%held/") {
			return true
		}
	}
	return false
}

// TestLockDelayWaiterLostDuringTheDelayLeavesNoRecord: the contender that
// started a delay loses its key while it waits (an unclean end of its own:
// the next contender waits a delay of its own), and once the next holder
// released, no key is left — the first delay's record included.
func TestLockDelayWaiterLostDuringTheDelayLeavesNoRecord(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	_, l1 := delayedHolder(t, cli)
	deleteAndLose(t, cli, l1)
	s2 := newSession(t, cli, lock.WithLockDelay(uncleanDelay))
	failed := make(chan error, 1)
	go func() {
		_, err := s2.Acquire(ctx, "job")
		failed <- err
	}()
	var waiter string // its contender key, once its delay is started
	etcdtest.Eventually(t, time.Minute, func() bool {
		var record bool
		waiter = ""
		for _, k := range keysUnder(t, cli, prefix(t)) {
			switch {
			case strings.Contains(k, "%delayed/"):
				record = true
			case !strings.Contains(k, "%"):
				waiter = k
			}
		}
		return record && waiter != ""
	}, "the waiter never started the delay")
	if _, err := cli.Delete(ctx, waiter); err != nil {
		t.Fatal(err)
	}
	if err := <-failed; err == nil {
		t.Fatal("the waiter whose key was deleted acquired the lock")
	}
	l3, err := newSession(t, cli, lock.WithLockDelay(uncleanDelay)).Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if err := l3.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if keys := keysUnder(t, cli, prefix(t)); len(keys) != 0 {
		t.Errorf("keys left after the next holder released: %v", keys)
	}
}

// TestLockDelayFailedAcquisitionThenCloseIsClean: an acquisition that
// gives up while it waits out a delay ends cleanly, as a Release does;
// when its clean-up cannot reach etcd, Close deletes its marker (while
// its key exists), as it does for a failed Release. The next holder then
// waits only for the earlier unclean end, not for a delay of its own.
func TestLockDelayFailedAcquisitionThenCloseIsClean(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	_, l1 := delayedHolder(t, cli)
	if _, err := cli.Delete(ctx, l1.Key()); err != nil { // an unclean end
		t.Fatal(err)
	}
	p, url := etcdtest.Proxy(t, cluster.Endpoints()[0])
	s2 := newSession(t, etcdtest.Client(t, url), lock.WithLockDelay(uncleanDelay), lock.WithCleanupTimeout(300*time.Millisecond))
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	waiting := make(chan struct{})
	var once sync.Once
	hook := lock.WithWaitHook(func() {
		once.Do(func() {
			p.PauseTx() // the clean-up cannot reach etcd
			close(waiting)
		})
	})
	done := make(chan error, 1)
	go func() {
		_, err := s2.Acquire(actx, "job", hook)
		done <- err
	}()
	select {
	case <-waiting:
	case err := <-done:
		t.Fatalf("Acquire returned %v without waiting out the delay", err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire = %v, want context.Canceled", err)
	}
	// Dropped, not resumed: a resumed proxy would deliver the clean-up's
	// delete late, and etcd might still apply it.
	etcdtest.RestartProxy(t, p)
	own := fmt.Sprintf("%%held/%x-", int64(s2.Lease()))
	if ms := delayMarkers(t, cli, "job"); !slices.ContainsFunc(ms, func(m string) bool { return strings.Contains(m, own) }) {
		t.Fatalf("the failed acquisition's clean-up deleted its marker through a paused proxy: %v", ms)
	}
	if err := s2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if ms := delayMarkers(t, cli, "job"); slices.ContainsFunc(ms, func(m string) bool { return strings.Contains(m, own) }) {
		t.Errorf("the failed acquisition's marker outlived a successful Close: %v", ms)
	}
}

// txnFaults is a client whose transactions that delete get the fault
// set, one at a time: none, lost (applied, its reply lost), or an error of
// etcd's (not applied). Counts the operations of the transactions sent
// while counting is set.
type txnFaults struct {
	cli      *clientv3.Client
	fault    atomic.Value // func(*etcdserverpb.TxnRequest) (applied bool, err error), or nil
	counting atomic.Bool
	ops      atomic.Int64
}

func newTxnFaults(t *testing.T) *txnFaults {
	f := &txnFaults{}
	f.cli = interceptedClient(t, cluster.Endpoints(), func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		r, ok := req.(*etcdserverpb.TxnRequest)
		if !ok {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		if f.counting.Load() {
			f.ops.Add(int64(len(r.Success)))
		}
		if fault, _ := f.fault.Load().(func(*etcdserverpb.TxnRequest) (bool, error)); fault != nil {
			if applied, err := fault(r); err != nil {
				if applied {
					_ = invoker(ctx, method, req, reply, cc, opts...)
				}
				return err
			}
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	return f
}

// set makes fault apply to the transactions sent from now on.
func (f *txnFaults) set(fault func(*etcdserverpb.TxnRequest) (applied bool, err error)) {
	f.fault.Store(fault)
}

// deletes is a fault for every transaction that deletes.
func deletes(applied bool, err error) func(*etcdserverpb.TxnRequest) (bool, error) {
	return func(r *etcdserverpb.TxnRequest) (bool, error) {
		if txnHas(r, isDelete) || txnHas(r, func(op *etcdserverpb.RequestOp) bool { return op.GetRequestTxn() != nil }) {
			return applied, err
		}
		return false, nil
	}
}

// failedRelease acquires "job" on s, whose client is f's, and releases it
// through a fault on its delete: not applied, or applied with the reply
// lost.
func (f *txnFaults) failedRelease(t *testing.T, ctx context.Context, s *lock.Session, applied bool) {
	t.Helper()
	l, err := s.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	f.set(deletes(applied, context.DeadlineExceeded))
	defer f.set(nil)
	if err := l.Release(ctx); err == nil {
		t.Fatal("Release returned nil through the fault")
	}
}

// TestLockDelayKeptForCloseOnlyTillRewritten: a session reused for hours
// whose Releases fail now and then — before reaching etcd, or after, with
// the reply lost — and which acquires the names again, keeps for Close
// only the markers that may still be in etcd: each re-acquisition wrote a
// new key of its name, so the earlier key and its marker were gone or
// replaced, and Close sends no deletes for them.
func TestLockDelayKeptForCloseOnlyTillRewritten(t *testing.T) {
	t.Parallel()
	for name, applied := range map[string]bool{"not sent": false, "reply lost": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			f := newTxnFaults(t)
			s := newSession(t, f.cli, lock.WithLockDelay(uncleanDelay))
			const cycles = 100
			for range cycles {
				f.failedRelease(t, ctx, s, applied)
			}
			f.counting.Store(true)
			if err := s.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if n := f.ops.Load(); n > 1 {
				t.Errorf("Close sent %d marker deletes after %d failed Releases of one name, each followed by a new key of the name; want at most 1 (the last one's)", n, cycles)
			}
			if ms := delayMarkers(t, client(t), "job"); len(ms) != 0 {
				t.Errorf("markers left after a clean Close: %v", ms)
			}
		})
	}
}

// TestLockDelayLeftoverReplacedByAnyKind: after a failed Release of a
// lock with a lock-delay, the same session acquires the name again as
// another kind (a reader, a semaphore, a set: with WithLockDelay(0), as
// their options require). Replacing the leftover key deletes its marker
// too, and nothing is left after Close.
func TestLockDelayLeftoverReplacedByAnyKind(t *testing.T) {
	t.Parallel()
	again := map[string]func(ctx context.Context, s *lock.Session) (*lock.Lock, error){
		"TryAcquire shared": func(ctx context.Context, s *lock.Session) (*lock.Lock, error) {
			return s.TryAcquire(ctx, "job", lock.WithShared(), lock.WithLockDelay(0))
		},
		"Acquire shared": func(ctx context.Context, s *lock.Session) (*lock.Lock, error) {
			return s.Acquire(ctx, "job", lock.WithShared(), lock.WithLockDelay(0))
		},
		"TryAcquire limit": func(ctx context.Context, s *lock.Session) (*lock.Lock, error) {
			return s.TryAcquire(ctx, "job", lock.WithLimit(2), lock.WithLockDelay(0))
		},
		"Acquire limit": func(ctx context.Context, s *lock.Session) (*lock.Lock, error) {
			return s.Acquire(ctx, "job", lock.WithLimit(2), lock.WithLockDelay(0))
		},
		"AcquireAll": func(ctx context.Context, s *lock.Session) (*lock.Lock, error) {
			return s.AcquireAll(ctx, []string{"job", "other"}, lock.WithLockDelay(0))
		},
	}
	for name, acquire := range again {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			f := newTxnFaults(t)
			s := newSession(t, f.cli, lock.WithLockDelay(uncleanDelay))
			f.failedRelease(t, ctx, s, false)
			l2, err := acquire(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			if err := l2.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if ms := delayMarkers(t, client(t), "job"); len(ms) != 0 {
				t.Errorf("markers left after a failed Release, a clean re-acquisition as %s and a clean Close: %v", name, ms)
			}
		})
	}
}

// TestLockDelayCloseRetriesMarkerDeletes: Close's marker deletes are tried
// again while etcd is unavailable (the marker is gone and Close returns
// nil); when etcd refuses them, Close still revokes the lease and returns
// an error wrapping ErrMarkersKept, as the marker stays.
func TestLockDelayCloseRetriesMarkerDeletes(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		err  error
		kept bool
	}{
		"unavailable twice": {status.Error(codes.Unavailable, "injected"), false},
		"refused":           {status.Error(codes.PermissionDenied, "injected"), true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			f := newTxnFaults(t)
			s := newSession(t, f.cli, lock.WithLockDelay(uncleanDelay))
			l, err := s.Acquire(ctx, "job")
			if err != nil {
				t.Fatal(err)
			}
			var failed atomic.Int64
			f.set(func(r *etcdserverpb.TxnRequest) (bool, error) {
				if failed.Add(1) > 2 && !tc.kept {
					return false, nil
				}
				return false, tc.err
			})
			err = s.Close(ctx)
			f.set(nil)
			if got := errors.Is(err, lock.ErrMarkersKept); got != tc.kept {
				t.Fatalf("Close = %v, want ErrMarkersKept: %v", err, tc.kept)
			}
			if ms := delayMarkers(t, client(t), "job"); (len(ms) > 0) != tc.kept {
				t.Errorf("markers after Close: %v, want kept: %v", ms, tc.kept)
			}
			if keys := keysUnder(t, client(t), prefix(t)); slices.Contains(keys, l.Key()) {
				t.Errorf("the lock's key outlived Close's revoke: %v", keys)
			}
		})
	}
}
