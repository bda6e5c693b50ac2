package lock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"

	"github.com/etcdlock/etcdlock/pkg/clock"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/internal/keyspace"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// cluster is one embedded etcd shared by the package's tests; each test
// uses its own key prefix.
var cluster *etcdtest.Shared

func TestMain(m *testing.M) {
	cluster = etcdtest.Start()
	os.Exit(etcdtest.RunMain(m, func() { cluster.Close() }))
}

// testCtx bounds a test's calls: long enough for tests running in
// parallel on a loaded machine, short of the package's timeout.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func prefix(t *testing.T) string {
	return "/test/" + strings.ReplaceAll(t.Name(), "/", "_") + "/"
}

func client(t *testing.T) *clientv3.Client {
	return etcdtest.Client(t, cluster.Endpoints()...)
}

// compactable returns the endpoints of an etcd that t may compact: one of
// its own, as a compaction of the shared cluster would cut off the watches
// of every test running beside it, or the external etcd when the test
// binary runs alone on it, one test at a time (etcdtest.Alone).
func compactable(t *testing.T) []string {
	t.Helper()
	if eps := etcdtest.Alone(); eps != nil {
		return eps
	}
	return etcdtest.Cluster(t).Endpoints()
}

// remaining is the time left until s's deadline on clk, s's clock, or 0
// once s ended.
func remaining(s *lock.Session, clk clock.Clock) time.Duration {
	if s.Err() != nil {
		return 0
	}
	return max(s.Deadline().Sub(clk.Now()), 0)
}

// The bounds the options state in their docs.
const (
	maxTTL       = 9_000_000_000 * time.Second // WithTTL: etcd's lease.MaxLeaseTTL
	maxLimit     = 1 << 16                     // WithLimit
	maxLockDelay = time.Hour                   // WithLockDelay
)

// newSessionTTL is the TTL of newSession's sessions unless opts say otherwise.
const newSessionTTL = 5 * time.Second

// newSession opens a session with the test's prefix, closed when t ends.
func newSession(t *testing.T, cli *clientv3.Client, opts ...lock.SessionOption) *lock.Session {
	t.Helper()
	opts = append([]lock.SessionOption{lock.WithPrefix(prefix(t)), lock.WithLogger(zaptest.NewLogger(t)), lock.WithTTL(newSessionTTL)}, opts...)
	s, err := lock.NewSession(testCtx(t), cli, opts...)
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Close(ctx)
	})
	return s
}

func keysUnder(t *testing.T, cli *clientv3.Client, pfx string) []string {
	t.Helper()
	resp, err := cli.Get(testCtx(t), pfx, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
	}
	return keys
}

// waitLost fails t unless l is lost within timeout, and, if cause is not
// nil, with an error matching cause; why says what should lose it.
func waitLost(t *testing.T, l *lock.Lock, cause error, timeout time.Duration, why string) {
	t.Helper()
	select {
	case <-l.Context().Done():
	case <-time.After(timeout):
		t.Fatalf("%s, but lock %q is still held after %v", why, l.Name(), timeout)
	}
	if !errors.Is(l.Err(), lock.ErrLost) {
		t.Fatalf("%s, but lock %q ended with %v, not a loss", why, l.Name(), l.Err())
	}
	if cause != nil && !errors.Is(l.Err(), cause) {
		t.Errorf("%s: lock %q lost with %v, want %v", why, l.Name(), l.Err(), cause)
	}
}

// waitQueued waits until the lock name under the test's prefix has n keys:
// its holder's and n-1 waiters'.
func waitQueued(t *testing.T, cli *clientv3.Client, name string, n int) {
	t.Helper()
	etcdtest.Eventually(t, 10*time.Second, func() bool {
		return len(keysUnder(t, cli, namePrefix(t, prefix(t), name))) == n
	}, fmt.Sprintf("%s never had %d keys: the waiter did not queue", name, n))
}

// acquired is the outcome of an Acquire started by queueWaiter.
type acquired struct {
	l   *lock.Lock
	err error
}

// queueWaiter starts s.Acquire(ctx, name) in a goroutine, waits until that
// waiter is queued as the name's n-th key, and returns the channel that
// receives the Acquire's outcome (with opts). When t ends, the Acquire, if still
// waiting, is canceled and waited for.
func queueWaiter(t *testing.T, ctx context.Context, s *lock.Session, name string, n int, opts ...lock.AcquireOption) <-chan acquired {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	res := make(chan acquired, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		l, err := s.Acquire(ctx, name, opts...)
		res <- acquired{l, err}
	}()
	t.Cleanup(func() { cancel(); <-done })
	waitQueued(t, lock.ClientOf(s), name, n)
	return res
}

// namePrefix is the etcd key prefix of the contenders for name.
func namePrefix(t testing.TB, prefix, name string) string {
	t.Helper()
	return keyspace.Of(prefix, name).Contenders()
}

// watches counts, per key, the watches etcd created on the watch streams
// of a client made by watchedClient and no waitWatched has taken yet, and
// the deletions of each key those streams delivered.
type watches struct {
	mu        sync.Mutex
	created   map[string]int
	deleted   map[string]int
	onCreated func() // if set, called when etcd created a watch, before the client sees it
}

// watchedClient returns a client of the shared cluster whose watch streams
// report each watch etcd created: a test waits (waitWatched) for a lock's
// own-key watch, which starts a little after the acquisition, before it
// deletes the key.
func watchedClient(t *testing.T) (*clientv3.Client, *watches) {
	t.Helper()
	return watchedClientOf(t, cluster.Endpoints())
}

// watchedClientOf is watchedClient for endpoints, with more dial options.
func watchedClientOf(t *testing.T, endpoints []string, opts ...grpc.DialOption) (*clientv3.Client, *watches) {
	t.Helper()
	w := &watches{created: map[string]int{}, deleted: map[string]int{}}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: append(opts, grpc.WithChainStreamInterceptor(w.intercept))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli, w
}

func (w *watches) intercept(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || method != "/etcdserverpb.Watch/Watch" {
		return cs, err
	}
	return &watchStream{ClientStream: cs, w: w}, nil
}

// watchStream pairs each create request it sends with etcd's created
// reply, which comes in the same order on one stream.
type watchStream struct {
	grpc.ClientStream
	w    *watches
	mu   sync.Mutex
	sent []string
}

func (s *watchStream) SendMsg(m any) error {
	if c := m.(*pb.WatchRequest).GetCreateRequest(); c != nil {
		s.mu.Lock()
		s.sent = append(s.sent, string(c.Key))
		s.mu.Unlock()
	}
	return s.ClientStream.SendMsg(m)
}

func (s *watchStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	r := m.(*pb.WatchResponse)
	if err == nil && len(r.Events) > 0 {
		s.w.mu.Lock()
		for _, ev := range r.Events {
			if ev.Type == mvccpb.DELETE {
				s.w.deleted[string(ev.Kv.Key)]++
			}
		}
		s.w.mu.Unlock()
	}
	if err == nil && r.Created {
		s.mu.Lock()
		if len(s.sent) > 0 {
			s.w.mu.Lock()
			s.w.created[s.sent[0]]++
			if s.w.onCreated != nil {
				s.w.onCreated()
			}
			s.w.mu.Unlock()
			s.sent = s.sent[1:]
		}
		s.mu.Unlock()
	}
	return err
}

// until returns once cond, called with w's counts locked, holds; it
// fails t with msg after a minute.
func (w *watches) until(t *testing.T, msg string, cond func() bool) {
	t.Helper()
	etcdtest.Eventually(t, time.Minute, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return cond()
	}, msg)
}

// waitWatched returns once etcd created a watch of each key, and takes
// those watches: a later call for the same key waits for a new watch.
func (w *watches) waitWatched(t *testing.T, keys ...string) {
	t.Helper()
	w.until(t, fmt.Sprintf("no watch of %v was created", keys), func() bool {
		for _, k := range keys {
			if w.created[k] == 0 {
				return false
			}
		}
		for _, k := range keys {
			w.created[k]--
		}
		return true
	})
}

// waitWatchedUnder returns once etcd created a watch of a key or range
// that starts under pfx, and takes that watch.
func (w *watches) waitWatchedUnder(t *testing.T, pfx string) {
	t.Helper()
	w.until(t, fmt.Sprintf("no watch under %s was created", pfx), func() bool {
		for k, n := range w.created {
			if n > 0 && strings.HasPrefix(k, pfx) {
				w.created[k]--
				return true
			}
		}
		return false
	})
}

// waitDeleteSeen returns once a watch stream of the client delivered the
// deletion of key.
func (w *watches) waitDeleteSeen(t *testing.T, key string) {
	t.Helper()
	w.until(t, fmt.Sprintf("no watch delivered the deletion of %s", key), func() bool { return w.deleted[key] > 0 })
}

// renewals counts the lease renewals of the sessions given its option.
type renewals struct{ n atomic.Int64 }

func (r *renewals) option() lock.SessionOption {
	return lock.WithMetrics(renewCounter{func() { r.n.Add(1) }})
}

// renewCounter is a Metrics that calls renewed on every LeaseRenewed.
type renewCounter struct{ renewed func() }

func (renewCounter) Waiting(int)                         {}
func (renewCounter) Acquired(time.Duration)              {}
func (renewCounter) Ended(time.Duration, error)          {}
func (c renewCounter) LeaseRenewed(time.Duration, error) { c.renewed() }

// wait returns once n more renewals than now have been attempted.
func (r *renewals) wait(t *testing.T, n int64) {
	t.Helper()
	want := r.n.Load() + n
	etcdtest.Eventually(t, time.Minute, func() bool { return r.n.Load() >= want },
		fmt.Sprintf("the session did not renew %d times", n))
}

// sweeps returns once n more leftover sweeps than now have run: a session
// sweeps its leftovers right after each renewal, which the hook reports
// before the sweep, so it waits for n+1 renewals.
func (r *renewals) sweeps(t *testing.T, n int64) {
	t.Helper()
	r.wait(t, n+1)
}

// deletedAt watches key and returns a channel that receives when it is
// deleted, as seen by the test.
func deletedAt(t *testing.T, cli *clientv3.Client, key string) <-chan time.Time {
	t.Helper()
	ch := make(chan time.Time, 1)
	wch := cli.Watch(testCtx(t), key, clientv3.WithFilterPut())
	go func() {
		for wr := range wch {
			if len(wr.Events) > 0 {
				ch <- time.Now()
				return
			}
		}
	}()
	return ch
}

// mustNotReceive fails t if ch delivers within d: the waiter got a lock it
// must not have yet.
func mustNotReceive(t *testing.T, ch <-chan acquired, d time.Duration, why string) {
	t.Helper()
	select {
	case a := <-ch:
		t.Fatalf("%s, but the waiter returned (lock %v, err %v)", why, a.l != nil, a.err)
	case <-time.After(d):
	}
}

func mustReceive(t *testing.T, ch <-chan acquired, why string) *lock.Lock {
	t.Helper()
	select {
	case a := <-ch:
		if a.err != nil {
			t.Fatalf("%s: %v", why, a.err)
		}
		return a.l
	case <-time.After(10 * time.Second):
		t.Fatalf("%s, but the waiter is still waiting", why)
	}
	return nil
}

// delayMarkers lists the lock-delay markers of name under the test's prefix.
func delayMarkers(t *testing.T, cli *clientv3.Client, name string) []string {
	t.Helper()
	var ms []string
	for _, k := range keysUnder(t, cli, prefix(t)) {
		if strings.Contains(k, "%held/") {
			ms = append(ms, k)
		}
	}
	return ms
}

// acquireWatched acquires name on s, whose client watched watches, and
// returns once etcd created the watch of the lock's key.
func acquireWatched(t *testing.T, s *lock.Session, watched *watches, name string) *lock.Lock {
	t.Helper()
	l, err := s.Acquire(testCtx(t), name)
	if err != nil {
		t.Fatal(err)
	}
	watched.waitWatched(t, l.Key())
	return l
}

// deleteAndLose deletes l's key as an operator would and waits until l is
// lost for it.
func deleteAndLose(t *testing.T, cli *clientv3.Client, l *lock.Lock) {
	t.Helper()
	if _, err := cli.Delete(testCtx(t), l.Key()); err != nil {
		t.Fatal(err)
	}
	waitLost(t, l, lock.ErrKeyDeleted, 20*time.Second, "its key was deleted")
}
