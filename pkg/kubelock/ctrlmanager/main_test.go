package ctrlmanager_test

import (
	"os"
	"testing"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/kubelock/internal/kubetest"
)

// cluster is a 3-member etcd shared by the package's tests.
var cluster *etcdtest.Shared

func TestMain(m *testing.M) {
	if code, ok := asChild(); ok {
		os.Exit(code)
	}
	os.Exit(kubetest.Main(m, &cluster))
}
