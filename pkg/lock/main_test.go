package lock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"

	"github.com/etcdlock/etcdlock/pkg/embedded"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// cluster is one embedded etcd shared by the package's tests; each test
// uses its own key prefix.
var cluster *embedded.Cluster

func TestMain(m *testing.M) {
	cluster = etcdtest.Start()
	os.Exit(etcdtest.RunMain(m, func() { cluster.Close() }))
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func prefix(t *testing.T) string {
	return "/test/" + strings.ReplaceAll(t.Name(), "/", "_") + "/"
}

func client(t *testing.T) *clientv3.Client {
	return etcdtest.Client(t, cluster.Endpoints()...)
}

// newSession opens a session with the test's prefix, closed when t ends.
func newSession(t *testing.T, cli *clientv3.Client, opts ...lock.Option) *lock.Session {
	t.Helper()
	opts = append([]lock.Option{lock.WithPrefix(prefix(t)), lock.WithLogger(zaptest.NewLogger(t)), lock.WithTTL(5 * time.Second)}, opts...)
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

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// waitLost fails t unless l is lost within timeout, and, if cause is not
// nil, with an error matching cause; why says what should lose it.
func waitLost(t *testing.T, l *lock.Lock, cause error, timeout time.Duration, why string) {
	t.Helper()
	select {
	case <-l.Lost():
	case <-time.After(timeout):
		t.Fatalf("%s, but lock %q is still %v after %v", why, l.Name(), l.State(), timeout)
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
func queueWaiter(t *testing.T, ctx context.Context, s *lock.Session, name string, n int, opts ...lock.Option) <-chan acquired {
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
	waitQueued(t, s.Client(), name, n)
	return res
}

// namePrefix is lock.NamePrefix for arguments the test knows are valid.
func namePrefix(t testing.TB, prefix, name string) string {
	t.Helper()
	p, err := lock.NamePrefix(prefix, name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
