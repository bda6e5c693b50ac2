package kubelock_test

import (
	"context"
	"database/sql"
	"log"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/etcdlock/etcdlock/fencing/sqlfence"
	"github.com/etcdlock/etcdlock/pkg/kubelock"
	"github.com/etcdlock/etcdlock/pkg/kubelock/ctrlmanager"
)

// The snippets of pkg/kubelock/README.md, compiled (not run):
// TestReadmeSnippets in hack/snippets checks that each snippet's lines are
// in one of these functions, in order.

// The lock of a controller-runtime manager (README.md shows it as a diff).
func Example_readmeDiff() {
	etcd, podName, cfg := (*clientv3.Client)(nil), "pod-0", &rest.Config{}
	lk, err := kubelock.New(etcd, "my-controller", podName, kubelock.DefaultTimings) // etcd: *clientv3.Client
	if err != nil {
		log.Fatal(err)
	}
	defer lk.Close(context.Background())
	opts, err := ctrlmanager.Options(lk, ctrl.Options{
		LeaderElection:                true,
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	_, _ = mgr, err
}

// The lock of a controller-runtime manager.
func Example_readme() {
	etcd, podName, cfg := (*clientv3.Client)(nil), "pod-0", &rest.Config{}
	lk, err := kubelock.New(etcd, "my-controller", podName, kubelock.DefaultTimings) // etcd: *clientv3.Client
	if err != nil {
		log.Fatal(err)
	}
	defer lk.Close(context.Background()) // revokes within Timings.CallTimeout
	opts, err := ctrlmanager.Options(lk, ctrl.Options{LeaderElection: true, LeaderElectionReleaseOnCancel: true})
	if err != nil {
		log.Fatal(err)
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	_, _ = mgr, err
}

// A client-go elector's config completed by the lock.
func Example_readmeElectionConfig() {
	ctx, lk, run := context.Background(), (*kubelock.Lock)(nil), func(context.Context) {}
	cfg, err := kubelock.ElectionConfig(lk, leaderelection.LeaderElectionConfig{
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: run, // func(ctx): ctx ends with the term; kubelock.TermFrom(ctx) has its token
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	leaderelection.RunOrDie(ctx, cfg)
}

// A fenced write in the current term.
func Example_readmeTerm() {
	lk, db, total, id := (*kubelock.Lock)(nil), (*sql.DB)(nil), 10, 42
	write := func(ctx context.Context) error {
		term, err := lk.Term()
		if err != nil {
			return err
		}
		ctx, cancel := term.Bind(ctx) // ends with the term, too
		defer cancel()
		err = sqlfence.WithFence(ctx, db, "orders", term.Token(), func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, "UPDATE orders SET total = $1 WHERE id = $2", total, id)
			return err
		})
		return err
	}
	_ = write
}
