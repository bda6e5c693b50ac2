package holders_test

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

// testCtx bounds a test's calls, short of the package's timeout.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// prefix is the test's own key prefix.
func prefix(t *testing.T) string {
	return "/test/" + strings.ReplaceAll(t.Name(), "/", "_") + "/"
}

func client(t *testing.T) *clientv3.Client {
	return etcdtest.Client(t, cluster.Endpoints()...)
}

// newSession opens a session under the test's prefix, closed when t ends.
func newSession(t *testing.T, cli *clientv3.Client, opts ...lock.SessionOption) *lock.Session {
	t.Helper()
	opts = append([]lock.SessionOption{lock.WithPrefix(prefix(t)), lock.WithLogger(zaptest.NewLogger(t)), lock.WithTTL(5 * time.Second)}, opts...)
	s, err := lock.NewSession(testCtx(t), cli, opts...)
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Close(ctx)
	})
	return s
}

// waitLost fails t unless l is lost within timeout, with an error matching
// cause unless cause is nil; why says what should lose it.
func waitLost(t *testing.T, l *lock.Lock, cause error, timeout time.Duration, why string) {
	t.Helper()
	select {
	case <-l.Context().Done():
	case <-time.After(timeout):
		t.Fatalf("%s, but lock %q is still %v after %v", why, l.Name(), l.Err(), timeout)
	}
	if !errors.Is(l.Err(), lock.ErrLost) {
		t.Fatalf("%s, but lock %q is %v", why, l.Name(), l.Err())
	}
	if cause != nil && !errors.Is(l.Err(), cause) {
		t.Errorf("%s: lock %q lost with %v, want %v", why, l.Name(), l.Err(), cause)
	}
}

// acquired is the outcome of an Acquire started by queueWaiter.
type acquired struct {
	l   *lock.Lock
	err error
}

// queueWaiter starts s.Acquire(ctx, name, opts...) and returns once the
// name has n keys under the test's prefix, the waiter's the last; the
// channel receives the outcome. When t ends, an Acquire still waiting is
// canceled and waited for.
func queueWaiter(t *testing.T, ctx context.Context, s *lock.Session, name string, n int, opts ...lock.AcquireOption) <-chan acquired {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	out, done := make(chan acquired, 1), make(chan struct{})
	go func() {
		defer close(done)
		l, err := s.Acquire(ctx, name, opts...)
		out <- acquired{l, err}
	}()
	t.Cleanup(func() { cancel(); <-done })
	cli, contenders := client(t), keyspace.Of(prefix(t), name).Contenders()
	etcdtest.Eventually(t, 10*time.Second, func() bool {
		resp, err := cli.Get(ctx, contenders, clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == int64(n)
	}, fmt.Sprintf("%s never had %d contenders: the waiter did not queue", name, n))
	return out
}

// mustNotReceive fails t if the waiter returns within d: it got a lock it
// must not have yet.
func mustNotReceive(t *testing.T, ch <-chan acquired, d time.Duration, why string) {
	t.Helper()
	select {
	case a := <-ch:
		t.Fatalf("%s, but the waiter returned (lock %v, err %v)", why, a.l != nil, a.err)
	case <-time.After(d):
	}
}

// mustReceive returns the waiter's lock, failing t if it failed or still
// waits after 10 s.
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
