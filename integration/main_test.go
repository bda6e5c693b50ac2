package integration

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
)

// TestMain builds the etcdlock binary (cliPath) and starts the shared
// cluster; the helpers the tests share are in helpers_test.go.
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
