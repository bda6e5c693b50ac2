package etcdtest_test

import (
	"context"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"

	"github.com/etcdlock/etcdlock/pkg/embedded"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
)

var cluster *etcdtest.Shared

func TestMain(m *testing.M) {
	cluster = etcdtest.Start()
	os.Exit(etcdtest.RunMain(m, func() { cluster.Close() }))
}

// RestartProxy returns while a client through the proxy is idle (its
// connection is dropped only when next used), and the client then works
// through the new proxy.
func TestRestartProxyWithAnIdleClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, ep := etcdtest.Proxy(t, cluster.Endpoints()[0])
	cli := etcdtest.Client(t, ep)
	if _, err := cli.Put(ctx, "k", "1"); err != nil {
		t.Fatal(err)
	}
	restarted := make(chan struct{})
	go func() {
		defer close(restarted)
		etcdtest.RestartProxy(t, p)
	}()
	select {
	case <-restarted:
	case <-time.After(30 * time.Second):
		t.Fatal("RestartProxy has not returned with an idle client")
	}
	// The idle connection is dropped when next used; the client retries.
	var err error
	for range 20 {
		if _, err = cli.Put(ctx, "k", "2"); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("put through the restarted proxy: %v", err)
	}
}

// The test clusters serve no gRPC gateway, whose logger races with `go
// test -json` over os.Stderr; WithConfig turns it back on.
func TestClustersServeNoGateway(t *testing.T) {
	t.Parallel()
	status := func(c interface{ Endpoints() []string }) int {
		resp, err := http.Post(c.Endpoints()[0]+"/v3/kv/range", "application/json", strings.NewReader(`{"key":"YQ=="}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := status(cluster); got != http.StatusNotFound {
		t.Errorf("Start's cluster: gateway answered %d, want 404", got)
	}
	on := etcdtest.Cluster(t, embedded.WithConfig(func(cfg *embed.Config) { cfg.EnableGRPCGateway = true }))
	if got := status(on); got != http.StatusOK {
		t.Errorf("with the gateway turned back on: %d, want 200", got)
	}
}

// With EndpointsEnv set, Start and Endpoints return that etcd and start
// none, Close leaves it running, and Cluster skips its test; Alone names
// it only with AloneEnv=1 beside.
func TestExternalEtcd(t *testing.T) {
	t.Setenv(etcdtest.EndpointsEnv, "http://127.0.0.1:1,http://127.0.0.1:2")
	s := etcdtest.Start(embedded.WithMembers(3))
	want := []string{"http://127.0.0.1:1", "http://127.0.0.1:2"}
	if got := s.Endpoints(); !slices.Equal(got, want) {
		t.Errorf("Endpoints() = %q, want %q", got, want)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if got := etcdtest.Endpoints(t); !slices.Equal(got, want) {
		t.Errorf("Endpoints(t) = %q, want %q", got, want)
	}
	var inner *testing.T
	t.Run("own cluster", func(t *testing.T) {
		inner = t
		etcdtest.Cluster(t)
		t.Error("Cluster returned")
	})
	if !inner.Skipped() {
		t.Error("Cluster did not skip its test")
	}
	if got := etcdtest.Alone(); got != nil {
		t.Errorf("Alone() without %s = %q, want nil", etcdtest.AloneEnv, got)
	}
	t.Setenv(etcdtest.AloneEnv, "1")
	if got := etcdtest.Alone(); !slices.Equal(got, want) {
		t.Errorf("Alone() = %q, want %q", got, want)
	}
}
