package detached_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
)

// cluster is one embedded etcd shared by the package's tests; each test
// uses its own key prefix.
var cluster *etcdtest.Shared

func TestMain(m *testing.M) {
	cluster = etcdtest.Start()
	os.Exit(etcdtest.RunMain(m, func() { cluster.Close() }))
}

// maxTTL is the longest lease TTL etcd grants (its lease.MaxLeaseTTL).
const maxTTL = 9_000_000_000 * time.Second

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
