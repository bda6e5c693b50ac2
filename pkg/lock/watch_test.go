package lock_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/pkg/v3/proxy"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"

	"github.com/etcdlock/etcdlock/pkg/embedded"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/holders"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// A holder whose watch stream breaks must still learn of a delete that
// happened while it was disconnected, even after etcd compacted the
// revisions its watch would resume from: it re-reads the key. A key that
// survived keeps being watched.
func TestHolderNoticesDeleteMissedWhileDisconnected(t *testing.T) {
	t.Parallel()
	own := compactable(t)
	ctx, direct := testCtx(t), etcdtest.Client(t, own...)
	p, url := etcdtest.Proxy(t, own[0])
	cli := etcdtest.Client(t, url)
	s := newSession(t, cli, lock.WithTTL(30*time.Second))
	deleted, err := s.Acquire(ctx, "deleted")
	if err != nil {
		t.Fatal(err)
	}
	kept, err := s.Acquire(ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}

	p.Close() // the session's connection, and its watch stream, drop
	if _, err := direct.Delete(ctx, deleted.Key()); err != nil {
		t.Fatal(err)
	}
	put, err := direct.Put(ctx, prefix(t)+"other", "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := direct.Compact(ctx, put.Header.Revision); err != nil {
		t.Fatal(err)
	}
	etcdtest.RestartProxy(t, p)

	waitLost(t, deleted, lock.ErrKeyDeleted, 20*time.Second, "its key was deleted while it was disconnected")
	if kept.Err() != nil {
		t.Fatalf("the lock whose key survived ended: %v, want active", kept.Err())
	}
	if _, err := direct.Delete(ctx, kept.Key()); err != nil {
		t.Fatal(err)
	}
	waitLost(t, kept, lock.ErrKeyDeleted, 20*time.Second, "its key was deleted after the watch resumed")
}

// A waiter whose watch stream breaks must not miss the release it waits
// for, even when etcd compacted the revisions its watch would resume from
// before it reconnects: it re-reads and takes the lock.
func TestWaiterTakesAReleaseMissedAcrossCompaction(t *testing.T) {
	t.Parallel()
	own := compactable(t)
	ctx, direct := testCtx(t), etcdtest.Client(t, own...)
	w := waiterThroughProxy(t, ctx, own[0], direct)
	p, holder, got := w.p, w.holder, w.got

	p.Close() // the waiter's connection, and its watch stream, drop
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	put, err := direct.Put(ctx, prefix(t)+"other", "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := direct.Compact(ctx, put.Header.Revision); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-got:
		t.Fatalf("the waiter acquired while cut off from etcd: %v", l)
	case <-time.After(2 * time.Second): // its requests wait for a connection meanwhile
	}
	etcdtest.RestartProxy(t, p)

	waiterTakesOver(t, ctx, holder, got, "the waiter missed the release that happened while it was disconnected and compacted away")
}

// A waiter whose read is cut off in flight — its connection drops after
// the request left and before the reply came — keeps waiting: a read is
// safe to repeat, so Acquire retries it instead of failing, and takes the
// lock once it reconnects.
func TestWaiterRetriesAReadCutOffInFlight(t *testing.T) {
	t.Parallel()
	ctx, direct := testCtx(t), client(t)
	w := waiterThroughProxy(t, ctx, cluster.Endpoints()[0], direct)
	p, holder, got, logs := w.p, w.holder, w.got, w.logs

	p.PauseTx() // what the waiter sends from now on waits in the proxy
	sent := w.kv.started.Load()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// The release's event still reaches the waiter, whose read then waits
	// unanswered; closing the proxy drops it.
	etcdtest.Eventually(t, time.Minute, func() bool { return w.kv.started.Load() > sent },
		"the waiter never read after the release")
	select {
	case l := <-got:
		t.Fatalf("the waiter acquired while its requests were held back: %v", l)
	default:
	}
	etcdtest.RestartProxy(t, p) // the read in flight fails: Unavailable

	waiterTakesOver(t, ctx, holder, got, "the waiter did not take the lock after it reconnected")
	if logs.FilterMessage("waiting: read failed, retrying").Len() == 0 {
		t.Error("no read failed: the test did not cut one off in flight")
	}
}

// A waiter whose session is lost while its read waits for an etcd it can
// no longer reach returns the session's loss at once — it neither goes on
// waiting for a connection until the caller's context ends nor tries to
// delete its key, which goes with the lease — for every kind of waiter.
func TestWaiterReturnsItsSessionsLossWhileCutOff(t *testing.T) {
	t.Parallel()
	for _, kind := range []struct {
		name           string
		holder, waiter []lock.AcquireOption
	}{
		{"exclusive", nil, nil},
		{"reader", nil, []lock.AcquireOption{lock.WithShared()}},
		{"semaphore", []lock.AcquireOption{lock.WithLimit(1)}, []lock.AcquireOption{lock.WithLimit(1)}},
	} {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			ctx, direct := testCtx(t), client(t)
			p, url := etcdtest.Proxy(t, cluster.Endpoints()[0])
			holder, err := newSession(t, direct).Acquire(ctx, "n", kind.holder...)
			if err != nil {
				t.Fatal(err)
			}
			reads := new(kvCalls)
			cli, watched := watchedClientOf(t, []string{url}, grpc.WithChainUnaryInterceptor(reads.interceptor))
			reads.watchedBy(watched)
			// A clean-up as long as that would keep Acquire past the
			// bound below: there is none once the session is over.
			waiter := newSession(t, cli, lock.WithTTL(2*time.Second), lock.WithCleanupTimeout(30*time.Second))
			res := queueWaiter(t, ctx, waiter, "n", 2, kind.waiter...)
			// It watches the holder's key (a semaphore's waiter: the
			// name's keys) and has read its turn since: it waits for the
			// release.
			watched.waitWatchedUnder(t, namePrefix(t, prefix(t), "n"))
			reads.readAfterCreated(t)

			p.PauseTx()
			before := reads.started.Load()
			if err := holder.Release(ctx); err != nil {
				t.Fatal(err)
			}
			// The release's event reaches it; its read waits in the proxy.
			watched.waitDeleteSeen(t, holder.Key())
			etcdtest.Eventually(t, time.Minute, func() bool { return reads.started.Load() > before },
				"the waiter did not read after the release")
			p.Close() // and is dropped; the waiter cannot reconnect
			select {
			case <-waiter.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the waiter's session was not lost")
			}
			select {
			case r := <-res:
				if r.err == nil {
					t.Fatalf("acquired %v after its session was lost", r.l)
				}
				if !errors.Is(r.err, lock.ErrSessionLost) {
					t.Errorf("Acquire returned %v, want the session's loss", r.err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Acquire still waits 10 s after its session was lost")
			}
		})
	}
}

// A waiter whose session is closed — even with a context already done, so
// that Close cannot revoke the lease — deletes its key before its Acquire
// returns, so the contender behind it is not blocked for a TTL.
func TestClosedWaiterDeletesItsKey(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	holder, err := newSession(t, cli).Acquire(ctx, "n")
	if err != nil {
		t.Fatal(err)
	}
	ws := newSession(t, cli, lock.WithTTL(30*time.Second))
	res := queueWaiter(t, ctx, ws, "n", 2)
	third := queueWaiter(t, ctx, newSession(t, cli), "n", 3)

	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := ws.Close(done); err == nil {
		t.Error("Close with a done context revoked the lease: the test proves nothing")
	}
	if r := <-res; !errors.Is(r.err, lock.ErrSessionClosed) {
		t.Fatalf("the waiter's Acquire returned %v, want ErrSessionClosed", r.err)
	}
	keys := keysUnder(t, cli, namePrefix(t, prefix(t), "n"))
	if len(keys) != 2 || !slices.Contains(keys, holder.Key()) {
		t.Fatalf("keys under the name after the waiter failed: %v, want the holder's and the third contender's", keys)
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-third; r.err != nil {
		t.Fatalf("the third contender: %v", r.err)
	}
}

// Held locks share the session's watch stream: holding more locks adds no
// goroutines, and every one of them still notices its key's deletion.
func TestHeldLocksShareOneWatchStream(t *testing.T) {
	ctx, cli := testCtx(t), client(t)
	s := newSession(t, cli)
	first, err := s.Acquire(ctx, "l0") // opens the stream
	if err != nil {
		t.Fatal(err)
	}
	waitStream(t, s) // its goroutines have started
	before := runtime.NumGoroutine()
	const n = 200
	held := []*lock.Lock{first}
	for i := 1; i < n; i++ {
		l, err := s.Acquire(ctx, fmt.Sprintf("l%d", i))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	if grown := runtime.NumGoroutine() - before; grown > 10 {
		t.Errorf("%d more goroutines after acquiring %d more locks", grown, n-1)
	}
	if _, err := cli.Delete(ctx, prefix(t), clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	for _, l := range held {
		waitLost(t, l, lock.ErrKeyDeleted, 20*time.Second, "its key was deleted")
	}
}

// A lock released within the own-key watch delay on a fresh session must
// not leave the session's watch stream asleep: the next lock's key watch is
// still created, so a plain delete of its key is noticed.
func TestKeyWatchAfterQuickReleaseOnFreshSession(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	s := newSession(t, cli)
	start := time.Now()
	quick, err := s.Acquire(ctx, "quick")
	if err != nil {
		t.Fatal(err)
	}
	if err := quick.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d >= 100*time.Millisecond {
		t.Logf("acquire and release took %v, longer than the own-key watch delay: this run proves less", d)
	}
	held, err := s.Acquire(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Delete(ctx, held.Key()); err != nil {
		t.Fatal(err)
	}
	waitLost(t, held, lock.ErrKeyDeleted, 2*time.Second, "its key was deleted")
}

// A holder whose watch stream sits on a member cut off from the rest of
// the cluster still learns, within seconds, that its key was deleted
// through the majority: the member, without a leader, ends the stream
// (the session opens it with WithRequireLeader), and the session reopens
// it on a healthy member, where it re-reads the key.
func TestHolderOnPartitionedMemberNoticesDelete(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := etcdtest.Cluster(t, embedded.WithMembers(3), embedded.WithRaftTiming(50*time.Millisecond, 500*time.Millisecond))
	cut, majority := cutAndMajority(t, c)
	// The session's client knows only cut while the stream is opened, and
	// every member afterwards.
	cli := etcdtest.Client(t, cut.Endpoint())
	s := newSession(t, cli, lock.WithTTL(30*time.Second))
	l, err := s.Acquire(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	waitStream(t, s) // on cut, the only member cli knows yet
	cli.SetEndpoints(c.Endpoints()...)

	isolate(t, c, cut)
	if _, err := etcdtest.Client(t, majority...).Delete(ctx, l.Key()); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	waitLost(t, l, lock.ErrKeyDeleted, 15*time.Second, "its key was deleted through the majority")
	t.Logf("lost %v after the delete", time.Since(deleted))
}

// waitStream returns once s's watch stream is open and delivers events: a
// probe lock of s is lost when its key is deleted. The locks s already
// holds are watched on that stream.
func waitStream(t *testing.T, s *lock.Session) {
	t.Helper()
	probe, err := s.Acquire(testCtx(t), "probe")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.ClientOf(s).Delete(testCtx(t), probe.Key()); err != nil {
		t.Fatal(err)
	}
	waitLost(t, probe, lock.ErrKeyDeleted, 20*time.Second, "the probe's key was deleted")
}

// isolate cuts m off from the other members of c (raft messages both ways
// are dropped) until t ends.
func isolate(t *testing.T, c *embedded.Cluster, m *embedded.Member) {
	t.Helper()
	e := m.Etcd().Server
	var others []*embedded.Member
	for _, o := range c.Members() {
		if o == m {
			continue
		}
		others = append(others, o)
		oe := o.Etcd().Server
		e.CutPeer(oe.MemberID())
		oe.CutPeer(e.MemberID())
	}
	t.Cleanup(func() {
		for _, o := range others {
			if oe := o.Etcd(); oe != nil {
				e.MendPeer(oe.Server.MemberID())
				oe.Server.MendPeer(e.MemberID())
			}
		}
	})
}

// A holder whose etcd user may no longer read its key cannot watch it: it
// is lost with ErrWatchRefused, carrying etcd's reason, instead of holding
// on unwatched or retrying forever.
func TestHolderLostWhenWatchRefused(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := etcdtest.Cluster(t)
	pfx, end := prefix(t), clientv3.GetPrefixRangeEnd(prefix(t))
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	root := etcdtest.Client(t, c.Endpoints()...)
	must(root.RoleAdd(ctx, "root"))
	must(root.UserAdd(ctx, "root", "root-pw"))
	must(root.UserGrantRole(ctx, "root", "root"))
	must(root.RoleAdd(ctx, "locker"))
	must(root.RoleGrantPermission(ctx, "locker", pfx, end, clientv3.PermissionType(clientv3.PermReadWrite)))
	must(root.UserAdd(ctx, "u", "u-pw"))
	must(root.UserGrantRole(ctx, "u", "locker"))
	must(root.AuthEnable(ctx))
	admin := authClient(t, c.Endpoints()[0], "root", "root-pw")

	p, url := etcdtest.Proxy(t, c.Endpoints()[0])
	s := newSession(t, authClient(t, url, "u", "u-pw"), lock.WithTTL(30*time.Second))
	l, err := s.Acquire(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	// Cut the session off, so that its key watch is created (or, if it was
	// already, its key re-read) only after the permission is gone.
	p.Close()
	must(admin.RoleRevokePermission(ctx, "locker", pfx, end))
	etcdtest.RestartProxy(t, p)
	waitLost(t, l, lock.ErrWatchRefused, 20*time.Second, "it may no longer watch its key")
	if err := l.Err(); !errors.Is(err, lock.ErrWatchRefused) || !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("lost with %v, want ErrWatchRefused and etcd's permission denied", err)
	}
	t.Log(l.Err())
}

func authClient(t *testing.T, endpoint, user, password string) *clientv3.Client {
	t.Helper()
	// The dial authenticates: etcd checks the password with bcrypt, slow
	// under the race detector on a loaded machine.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, Username: user, Password: password, DialTimeout: time.Minute, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// proxiedWaiter is a waiter whose connection runs through a proxy the test
// controls (waiterThroughProxy).
type proxiedWaiter struct {
	p      proxy.Server
	holder *lock.Lock             // the lock the waiter waits for
	got    <-chan *lock.Lock      // the waiter's lock (nil if its Acquire failed, which fails t)
	logs   *observer.ObservedLogs // the waiter's debug log
	kv     *kvCalls               // the waiter's KV requests
}

// kvCalls counts a client's KV requests.
type kvCalls struct {
	started, finished atomic.Int64
	atCreated         atomic.Int64 // started when etcd last created a watch (watchedBy)
}

// interceptor counts the client's KV requests, started and finished.
func (kv *kvCalls) interceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if !strings.HasPrefix(method, "/etcdserverpb.KV/") {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	kv.started.Add(1)
	defer kv.finished.Add(1)
	return invoker(ctx, method, req, reply, cc, opts...)
}

// watchedBy notes, each time etcd creates a watch on w's client, how many
// KV requests had started.
func (kv *kvCalls) watchedBy(w *watches) {
	w.onCreated = func() { kv.atCreated.Store(kv.started.Load()) }
}

// readAfterCreated returns once a KV request started after etcd created
// the last watch has finished and none is in flight: a waiter that reads
// once its watch exists then waits for an event, sending nothing.
func (kv *kvCalls) readAfterCreated(t *testing.T) {
	t.Helper()
	etcdtest.Eventually(t, time.Minute, func() bool {
		f := kv.finished.Load()
		return kv.started.Load() == f && f > kv.atCreated.Load()
	}, "the waiter did not read again after its watch was created")
}

// waiterThroughProxy acquires "n" on a session of direct, then starts an
// Acquire of "n" on a session whose connection runs through a proxy to
// endpoint, an endpoint of direct's etcd, and
// returns once that waiter watches the holder's key and has read again
// after etcd created the watch: it waits for the release, sending nothing.
func waiterThroughProxy(t *testing.T, ctx context.Context, endpoint string, direct *clientv3.Client) proxiedWaiter {
	t.Helper()
	p, url := etcdtest.Proxy(t, endpoint)
	holder, err := newSession(t, direct).Acquire(ctx, "n")
	if err != nil {
		t.Fatal(err)
	}
	kv := new(kvCalls)
	cli, watched := watchedClientOf(t, []string{url}, grpc.WithChainUnaryInterceptor(kv.interceptor))
	kv.watchedBy(watched)
	core, logs := observer.New(zap.DebugLevel)
	waiter := newSession(t, cli, lock.WithTTL(30*time.Second), lock.WithLogger(zap.New(core)))
	got := make(chan *lock.Lock, 1)
	go func() {
		l, err := waiter.Acquire(ctx, "n")
		if err != nil {
			t.Errorf("the waiter: %v", err)
		}
		got <- l
	}()
	watched.waitWatched(t, holder.Key())
	kv.readAfterCreated(t)
	return proxiedWaiter{p: p, holder: holder, got: got, logs: logs, kv: kv}
}

// waiterTakesOver waits up to 20 s for the lock of waiterThroughProxy's
// waiter, fails t with msg if it does not come, checks that its token is
// above the released holder's, and releases it.
func waiterTakesOver(t *testing.T, ctx context.Context, holder *lock.Lock, got <-chan *lock.Lock, msg string) {
	t.Helper()
	select {
	case l := <-got:
		if l == nil {
			return // reported by the waiter
		}
		if l.Token() <= holder.Token() {
			t.Fatalf("the waiter's token %d is not above the released holder's %d", l.Token(), holder.Token())
		}
		if err := l.Release(ctx); err != nil { // while the new proxy runs: no key outlives the test
			t.Errorf("release after reconnecting: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal(msg)
	}
}

// Follow, whose watch stream sits on a member cut off from the rest of the
// cluster, still reports a release made through the majority: the member
// ends the stream, and Follow's next one, on a healthy member, reads again.
func TestFollowOnPartitionedMemberSeesRelease(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := etcdtest.Cluster(t, embedded.WithMembers(3), embedded.WithRaftTiming(50*time.Millisecond, 500*time.Millisecond))
	cut, majority := cutAndMajority(t, c)
	cli := etcdtest.Client(t, cut.Endpoint())
	next := followOwners(t, ctx, cli, "job")
	next("", 10*time.Second)
	other := etcdtest.Client(t, majority...)
	l, err := newSession(t, other, lock.WithOwner("alice")).Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	next("alice", 10*time.Second) // Follow's stream on cut delivers
	cli.SetEndpoints(c.Endpoints()...)
	isolate(t, c, cut)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	next("", 20*time.Second)
}

// A semaphore waiter whose watch stream sits on a member cut off from the
// rest of the cluster still takes a slot released through the majority.
func TestSemaphoreWaiterOnPartitionedMemberTakesReleasedSlot(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := etcdtest.Cluster(t, embedded.WithMembers(3), embedded.WithRaftTiming(50*time.Millisecond, 500*time.Millisecond))
	cut, majority := cutAndMajority(t, c)
	other := etcdtest.Client(t, majority...)
	l, err := newSession(t, other, lock.WithOwner("alice")).Acquire(ctx, "pool", lock.WithLimit(1))
	if err != nil {
		t.Fatal(err)
	}
	cli := etcdtest.Client(t, cut.Endpoint())
	bob := queueWaiter(t, ctx, newSession(t, cli, lock.WithTTL(30*time.Second)), "pool", 2, lock.WithLimit(1))
	cli.SetEndpoints(c.Endpoints()...)
	isolate(t, c, cut)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case b := <-bob:
		if b.err != nil {
			t.Fatalf("waiter: %v", b.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter did not take the released slot")
	}
}

// cutAndMajority picks a follower of c to cut off and returns it with the
// endpoints of the others.
func cutAndMajority(t *testing.T, c *embedded.Cluster) (*embedded.Member, []string) {
	t.Helper()
	leader, err := c.Leader(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	var cut *embedded.Member
	var majority []string
	for _, m := range c.Members() {
		if m != leader && cut == nil {
			cut = m
		} else {
			majority = append(majority, m.Endpoint())
		}
	}
	return cut, majority
}

// A session whose renewals start on a member that is then cut off from
// the rest of the cluster keeps its lease through the others: a renewal
// held by the cut-off member is given up in time for the next, on
// another endpoint.
func TestSessionRenewsPastAMemberCutOff(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := etcdtest.Cluster(t, embedded.WithMembers(3), embedded.WithRaftTiming(50*time.Millisecond, 500*time.Millisecond))
	cut, _ := cutAndMajority(t, c)
	cli := etcdtest.Client(t, cut.Endpoint())
	const ttl = 3 * time.Second
	s := newSession(t, cli, lock.WithTTL(ttl))
	l, err := s.Acquire(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	cli.SetEndpoints(c.Endpoints()...)
	isolate(t, c, cut)
	select {
	case <-l.Context().Done():
		t.Fatalf("lost while a majority was up: %v", l.Err())
	case <-time.After(3 * ttl):
	}
	if l.Err() != nil {
		t.Fatalf("state %v after 3 TTLs with a majority up, want active", l.Err())
	}
}

// Sessions whose client lists every member keep their leases while one
// member is frozen (its connections open, nothing answered): a renewal
// held there is joined by another request on another endpoint.
func TestSessionsRenewPastAFrozenMember(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	_, cli, freeze := clusterBehindProxies(t)
	const ttl = 6 * time.Second // slack for a loaded machine: two renewal rounds fit before the deadline
	var held []*lock.Lock
	for i := range 6 {
		l, err := newSession(t, cli, lock.WithTTL(ttl)).Acquire(ctx, fmt.Sprintf("held-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	freeze()
	time.Sleep(3 * ttl) // the fault's length
	for i, l := range held {
		if l.Err() != nil {
			t.Errorf("lock %d ended after 3 TTLs with one member of three frozen: %v", i, l.Err())
		}
	}
}

// Follow, on a client that lists every member, reports a release while
// one member is frozen: a read or a watch stream held there is given up
// and made again on another endpoint.
func TestFollowPastAFrozenMember(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c, cli, freeze := clusterBehindProxies(t)
	other := etcdtest.Client(t, c.Endpoints()[1:]...)
	next := followOwners(t, ctx, cli, "job")
	next("", 30*time.Second)
	freeze()
	for _, owner := range []string{"a", "b", "c"} {
		l, err := newSession(t, other, lock.WithOwner(owner)).Acquire(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		next(owner, 30*time.Second)
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		next("", 30*time.Second)
	}
}

// clusterBehindProxies starts a 3-member cluster and returns it, a client
// that reaches each member through a proxy of its own, and a function
// that freezes the first member's proxy (connections stay open, nothing
// is delivered either way) until the test ends.
func clusterBehindProxies(t *testing.T) (*embedded.Cluster, *clientv3.Client, func()) {
	t.Helper()
	c := etcdtest.Cluster(t, embedded.WithMembers(3), embedded.WithRaftTiming(50*time.Millisecond, 500*time.Millisecond))
	var urls []string
	var first proxy.Server
	for i, ep := range c.Endpoints() {
		p, url := etcdtest.Proxy(t, ep)
		if i == 0 {
			first = p
		}
		urls = append(urls, url)
	}
	freeze := func() {
		first.PauseTx()
		first.PauseRx()
		t.Cleanup(func() { first.UnpauseTx(); first.UnpauseRx() })
	}
	cli := etcdtest.Client(t, urls...)
	// The client connects to its endpoints once asked to: a member frozen
	// before its connection is up is never picked, and the test would be
	// blind. Every member must have answered once.
	served := map[uint64]bool{}
	etcdtest.Eventually(t, 10*time.Second, func() bool {
		if resp, err := cli.Get(context.Background(), "warm-up"); err == nil {
			served[resp.Header.MemberId] = true
		}
		return len(served) == len(urls)
	}, "the client did not reach every member")
	return c, cli, freeze
}

// Waiters on a client that lists every member take the locks released
// while one member is frozen: a read or a watch stream held there is
// given up and made again on another endpoint.
func TestWaitersPastAFrozenMember(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c, cli, freeze := clusterBehindProxies(t)
	other := etcdtest.Client(t, c.Endpoints()[1:]...)
	const n = 6
	var held []*lock.Lock
	var waiters []<-chan acquired
	for i := range n {
		name := fmt.Sprintf("job-%d", i)
		l, err := newSession(t, other).Acquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
		waiters = append(waiters, queueWaiter(t, ctx, newSession(t, cli, lock.WithTTL(30*time.Second)), name, 2))
	}
	freeze()
	for _, l := range held {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The member stays frozen until the test ends: a bound far above the
	// recovery's (a silent stream is replaced within 10 s, a read is
	// tried for 5 s on an endpoint) tells a waiter that moved on from one
	// stuck there, also on a loaded machine.
	deadline := time.After(60 * time.Second)
	for i, w := range waiters {
		select {
		case a := <-w:
			if a.err != nil {
				t.Errorf("waiter %d: %v", i, a.err)
			}
		case <-deadline:
			t.Fatalf("waiter %d not handed its lock within 60 s of the release", i)
		}
	}
}

// followOwners runs Follow of name, under the test's prefix, until the
// test ends. It returns a function that waits, up to within, for a report
// whose holder has owner want ("" for none), skipping others.
func followOwners(t *testing.T, ctx context.Context, cli *clientv3.Client, name string) func(want string, within time.Duration) {
	fctx, stop := context.WithCancel(ctx)
	owners, done := make(chan string, 64), make(chan struct{})
	go func() {
		defer close(done)
		holders.Follow(fctx, cli, prefix(t), name, func(st holders.Status) bool {
			owner := ""
			if st.Holder != nil {
				owner = st.Holder.Owner
			}
			owners <- owner
			return true
		})
	}()
	t.Cleanup(func() { stop(); <-done })
	return func(want string, within time.Duration) {
		t.Helper()
		deadline := time.After(within)
		for {
			select {
			case got := <-owners:
				if got == want {
					return
				}
			case <-deadline:
				t.Fatalf("Follow did not report holder %q within %v", want, within)
			}
		}
	}
}
