// Package etcdtest holds test helpers for code that uses etcdlock: a real
// embedded etcd, clients bound to a test's lifetime, and a TCP proxy for
// injecting network faults between a client and etcd.
//
// With EndpointsEnv set, the tests run against an etcd started outside
// the test binary instead (make compat: each etcd release it supports):
// Start starts nothing, and Cluster skips the tests that need an etcd of
// their own.
package etcdtest

import (
	"context"
	"errors"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/pkg/v3/proxy"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/etcdlock/etcdlock/pkg/embedded"
	"github.com/etcdlock/etcdlock/pkg/internal/leakcheck"
)

// EndpointsEnv is the environment variable that points the tests at an
// etcd they did not start: the client URLs of a running cluster,
// comma-separated, whose keys the tests may write and delete.
const EndpointsEnv = "ETCDLOCK_TEST_ENDPOINTS"

// AloneEnv, set to 1 beside EndpointsEnv, says that the test binary runs
// alone on that etcd and one test at a time (-test.parallel 1): see Alone.
const AloneEnv = "ETCDLOCK_TEST_ALONE"

// External returns the endpoints that EndpointsEnv names, or nil when it
// is unset.
func External() []string {
	v := strings.TrimSpace(os.Getenv(EndpointsEnv))
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// Alone returns the external etcd's endpoints when the test binary runs
// alone on it, one test at a time (AloneEnv), for a test that changes what
// every test on it would share (it compacts the history); nil otherwise.
func Alone() []string {
	if os.Getenv(AloneEnv) != "1" {
		return nil
	}
	return External()
}

// Shared is the etcd that a test binary's tests share, from Start.
type Shared struct {
	endpoints []string
	cluster   *embedded.Cluster // nil: the external etcd of EndpointsEnv
}

// Endpoints returns the client URLs of every member.
func (s *Shared) Endpoints() []string { return append([]string(nil), s.endpoints...) }

// Close stops the embedded cluster; an external etcd is left running.
func (s *Shared) Close() error {
	if s.cluster == nil {
		return nil
	}
	return s.cluster.Close()
}

// Start starts an embedded cluster for a whole test binary (from TestMain),
// failing hard if it cannot, or, with EndpointsEnv set, returns that etcd
// and ignores opts. The caller closes it.
//
// The clusters of Start and Cluster serve no gRPC gateway (etcd's
// HTTP/JSON API): each gateway builds a logrus logger, which reads
// os.Stderr while `go test -json` replaces it, a data race under -race.
// embedded.WithConfig among opts may turn it back on.
func Start(opts ...embedded.Option) *Shared {
	if eps := External(); eps != nil {
		return &Shared{endpoints: eps}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := embedded.Start(ctx, testOptions(opts)...)
	if err != nil {
		panic("etcdtest: cannot start embedded etcd: " + err.Error())
	}
	return &Shared{endpoints: c.Endpoints(), cluster: c}
}

// Cluster starts an embedded cluster closed when t ends. With EndpointsEnv
// set it skips t: a test that starts an etcd of its own stops, restarts,
// cuts off or configures its members, or needs a history of its own.
func Cluster(t testing.TB, opts ...embedded.Option) *embedded.Cluster {
	t.Helper()
	if External() != nil {
		t.Skip("needs an embedded etcd of its own (etcdtest.Cluster), not the external one")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := embedded.Start(ctx, testOptions(opts)...)
	if err != nil {
		t.Fatalf("start embedded etcd: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Endpoints returns the client URLs of an etcd for t, for a test that
// needs nothing of it but its own keys: the external etcd of EndpointsEnv,
// or else a new embedded cluster closed when t ends.
func Endpoints(t testing.TB) []string {
	t.Helper()
	if eps := External(); eps != nil {
		return eps
	}
	return Cluster(t).Endpoints()
}

// testOptions are opts after the test clusters' own: no gRPC gateway.
func testOptions(opts []embedded.Option) []embedded.Option {
	noGateway := embedded.WithConfig(func(cfg *embed.Config) { cfg.EnableGRPCGateway = false })
	return append([]embedded.Option{noGateway}, opts...)
}

// Client returns a client of endpoints closed when t ends.
func Client(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// Proxy starts a TCP proxy on a free port forwarding to target (an
// http://127.0.0.1:PORT URL) and returns it with its own URL, on
// 127.0.0.1. etcd's proxy listens on every interface: while it runs, the
// etcd behind it can be reached from the network on that port. It is
// closed when t ends.
func Proxy(t testing.TB, target string) (proxy.Server, string) {
	t.Helper()
	to, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	for attempt := 1; ; attempt++ {
		// Clients dial 127.0.0.1; etcd's proxy listens on every interface.
		addr := FreeAddr(t)
		p, err := startProxy(t, addr, to.Host)
		if err == nil {
			return p, "http://" + addr
		}
		if attempt == 5 || !errors.Is(err, syscall.EADDRINUSE) {
			t.Fatalf("proxy: %v", err)
		}
	}
}

// FreeAddr returns 127.0.0.1:PORT with a port free at the moment on every
// interface (etcd's proxy binds them all), below the kernel's ephemeral
// range: see embedded.FreeLoopbackAddr. It fails t if there is none.
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := embedded.FreeLoopbackAddr("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// RestartProxy closes p and starts a new proxy on the same address to the
// same target, so clients reconnect. Closing p drops each connection
// through it when the connection next carries data, either way — at once
// for a request in flight while p's traffic is paused (PauseTx, PauseRx),
// which is how a test drops it. RestartProxy waits up to a second for
// every connection to be dropped so, then starts the new proxy anyway: an
// idle connection (a client between requests) is dropped only when it is
// next used. The new proxy is closed when t ends.
func RestartProxy(t testing.TB, p proxy.Server) proxy.Server {
	t.Helper()
	from, err := url.Parse(p.From())
	if err != nil {
		t.Fatal(err)
	}
	to, err := url.Parse(p.To())
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		p.Close() // closes the listener at once, then waits for the connections
	}()
	select {
	case <-closed:
	case <-time.After(time.Second):
	}
	for attempt := 1; ; attempt++ {
		np, err := startProxy(t, from.Host, to.Host)
		if err == nil {
			return np
		}
		if attempt == 50 || !errors.Is(err, syscall.EADDRINUSE) {
			t.Fatalf("proxy: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // until the old listener is closed
	}
}

// startProxy starts a proxy from from to to, closed when t ends, or
// returns why it could not listen.
func startProxy(t testing.TB, from, to string) (proxy.Server, error) {
	p := proxy.NewServer(proxy.ServerConfig{
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)).Named("proxy"),
		From:   url.URL{Scheme: "tcp", Host: from},
		To:     url.URL{Scheme: "tcp", Host: to},
	})
	select {
	case <-p.Ready():
	case err := <-p.Error():
		return nil, err
	}
	t.Cleanup(func() {
		// Close returns once every connection through p has ended, and
		// ends an idle one only when it carries data again. A client made
		// before a RestartProxy is closed by a cleanup that runs after this
		// one: wait briefly, then let the rest end with the clients
		// (goleak reports a connection that never does).
		closed := make(chan struct{})
		go func() {
			defer close(closed)
			p.Close()
		}()
		select {
		case <-closed:
		case <-time.After(100 * time.Millisecond):
		}
	})
	return p, nil
}

// Eventually polls cond every 10ms until it holds or timeout passes, then
// fails t with msg.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, msg string) {
	t.Helper()
	end := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out after %v: %s", timeout, msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// RunMain runs a package's tests (from TestMain), then cleanup, then — if
// the tests passed — checks that no goroutine leaked (goleak, with opts),
// allowing those of stopped etcd members some seconds to end. It returns
// the exit code for os.Exit.
func RunMain(m *testing.M, cleanup func(), opts ...goleak.Option) int {
	code := m.Run()
	cleanup()
	if code == 0 {
		if err := leakcheck.Find(leakcheck.Patience, opts...); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	return code
}
