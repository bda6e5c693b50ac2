package ctrlmanager_test

import (
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"k8s.io/klog/v2"

	"github.com/etcdlock/etcdlock/pkg/embedded"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
)

// cluster is a 3-member etcd shared by the package's tests.
var cluster *embedded.Cluster

func TestMain(m *testing.M) {
	// client-go's elector logs every attempt through klog.
	klog.SetLogger(logr.Discard())
	cluster = etcdtest.Start(embedded.WithMembers(3), embedded.WithRaftTiming(50*time.Millisecond, 500*time.Millisecond))
	os.Exit(etcdtest.RunMain(m, func() { cluster.Close() },
		// klog's flush daemon, started by client-go's import, runs for the
		// process's lifetime.
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
	))
}
