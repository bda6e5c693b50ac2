package kubelock

import (
	"os"
	"strings"
	"testing"

	"github.com/etcdlock/etcdlock/pkg/embedded"
	"github.com/etcdlock/etcdlock/pkg/kubelock/internal/kubetest"
)

// cluster is a 3-member etcd shared by the package's tests, each under its
// own prefix.
var cluster *embedded.Cluster

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m, &cluster)) }

func prefix(t testing.TB) string {
	return "/kube/" + strings.ReplaceAll(t.Name(), "/", "_") + "/"
}
