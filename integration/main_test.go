package integration

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/pkg/v3/proxy"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/etcdlock/etcdlock/pkg/embedded"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// shared is one single-member etcd for the scenarios that do not stop or
// restart servers; each test uses its own key prefix.
var shared *embedded.Cluster

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "etcdlock-bin-")
	if err != nil {
		panic(err)
	}
	if err := buildCLI(dir); err != nil {
		os.RemoveAll(dir)
		panic(err)
	}
	shared = etcdtest.Start()
	// etcd's peer /version handler can stay blocked forever on the backend
	// of a member killed with HardStop while it served a peer (an
	// etcd-internal goroutine of a dead in-process member; a real crash
	// would take it with the process).
	os.Exit(etcdtest.RunMain(m, func() { shared.Close(); os.RemoveAll(dir) },
		goleak.IgnoreAnyFunction("go.etcd.io/etcd/server/v3/etcdserver/api/etcdhttp.newPeerHandler.versionHandler.func1")))
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func prefixOf(t *testing.T) string {
	return "/it/" + strings.ReplaceAll(t.Name(), "/", "_") + "/"
}

// proxied returns a client that reaches the first endpoint through a proxy
// the test controls.
func proxied(t *testing.T, c *embedded.Cluster) (*clientv3.Client, proxy.Server) {
	p, url := etcdtest.Proxy(t, c.Endpoints()[0])
	return etcdtest.Client(t, url), p
}

func session(t *testing.T, cli *clientv3.Client, owner string, opts ...lock.SessionOption) *lock.Session {
	t.Helper()
	opts = append([]lock.SessionOption{
		lock.WithPrefix(prefixOf(t)), lock.WithOwner(owner), lock.WithTTL(3 * time.Second),
		lock.WithLogger(zaptest.NewLogger(t).Named(owner)), lock.WithCleanupTimeout(time.Second),
	}, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := lock.NewSession(ctx, cli, opts...)
	if err != nil {
		t.Fatalf("session %s: %v", owner, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s.Close(ctx)
	})
	return s
}

func detached(t *testing.T, cli *clientv3.Client) *lock.Detached {
	t.Helper()
	d, err := lock.NewDetached(cli, lock.WithPrefix(prefixOf(t)), lock.WithCleanupTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func acquire(t *testing.T, ctx context.Context, s *lock.Session, name string) *lock.Lock {
	t.Helper()
	l, err := s.Acquire(ctx, name)
	if err != nil {
		t.Fatalf("%s: Acquire(%q): %v", s.Owner(), name, err)
	}
	return l
}

// lostAt waits for l to be lost and returns when the holder noticed.
func lostAt(t *testing.T, l *lock.Lock, within time.Duration) time.Time {
	t.Helper()
	select {
	case <-l.Lost():
	case <-time.After(within):
		t.Fatalf("%s still believes it holds %q after %v", l.Owner(), l.Name(), within)
	}
	var lost *lock.LostError
	if !errors.As(l.Err(), &lost) {
		t.Fatalf("lost lock's Err() = %v, want *LostError", l.Err())
	}
	return lost.At
}

// holder returns the current holder key and token of name, or "" and 0.
func holder(t *testing.T, ctx context.Context, cli *clientv3.Client, name string) (string, int64) {
	t.Helper()
	resp, err := cli.Get(ctx, prefixOf(t)+name+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return "", 0
	}
	return string(resp.Kvs[0].Key), resp.Kvs[0].CreateRevision
}
