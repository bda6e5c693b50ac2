// Package kubetest holds what the tests of package kubelock and its
// subpackages share: their etcd cluster's TestMain, a manager's rest
// config without an API server, and the knobs read from the environment.
package kubetest

import (
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/etcdlock/etcdlock/pkg/embedded"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
)

// Main starts a 3-member etcd, sets *cluster to it, runs the package's
// tests, closes the cluster and checks for leaked goroutines. It returns
// the exit code for os.Exit.
func Main(m *testing.M, cluster **etcdtest.Shared) int {
	// client-go's elector logs every attempt through klog.
	klog.SetLogger(logr.Discard())
	*cluster = etcdtest.Start(embedded.WithMembers(3), embedded.WithRaftTiming(50*time.Millisecond, 500*time.Millisecond))
	return etcdtest.RunMain(m, func() { (*cluster).Close() },
		// klog's flush daemon, started by client-go's import, runs for the
		// process's lifetime.
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
	)
}

// NoAPIServer returns a rest.Config whose host is a loopback port nobody
// listens on: managers run without a Kubernetes API server, and would
// fail if they needed one.
func NoAPIServer(t testing.TB) *rest.Config {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return &rest.Config{Host: "http://" + addr}
}

// EnvInt returns the integer in environment variable name, or def if it
// is unset.
func EnvInt(t testing.TB, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, s, err)
	}
	return n
}

// WaitFor waits until cond holds, checking it at each receive from change
// and at least every 50 ms, or fails t once within has passed.
func WaitFor(t testing.TB, change <-chan struct{}, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(within)
	for !cond() {
		select {
		case <-change:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("no %s within %v", what, within)
		}
	}
}
