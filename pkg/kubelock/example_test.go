package kubelock_test

import (
	"context"
	"fmt"
	"log"
	"os"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/client-go/tools/leaderelection"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/etcdlock/etcdlock/pkg/kubelock"
	"github.com/etcdlock/etcdlock/pkg/kubelock/ctrlmanager"
)

// A controller on client-go's LeaderElector keeps its configuration and
// swaps the lock: ElectionConfig sets the lock and its durations, and runs
// the callback on the term's context, which ends as soon as etcd shows the
// term is over and carries the term's fencing token.
func Example() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:2379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	host, _ := os.Hostname()
	lk, err := kubelock.New(cli, "my-controller", host, kubelock.DefaultTimings)
	if err != nil {
		log.Fatal(err)
	}
	defer lk.Close(context.Background())

	cfg, err := kubelock.ElectionConfig(lk, leaderelection.LeaderElectionConfig{
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				term, _ := kubelock.TermFrom(ctx)
				// Pass term.Token() with every write (package fencing).
				fmt.Println("leading with token", term.Token())
				<-ctx.Done()
			},
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	leaderelection.RunOrDie(context.Background(), cfg)
}

// A controller-runtime manager: package ctrlmanager sets the lock, its
// durations and a BaseContext that ends every Runnable's context with the
// term; a leader-election Runnable reads its term's fencing token.
func Example_controllerRuntime() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:2379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	host, _ := os.Hostname()
	lk, err := kubelock.New(cli, "my-controller", host, kubelock.DefaultTimings)
	if err != nil {
		log.Fatal(err)
	}
	defer lk.Close(context.Background())

	opts, err := ctrlmanager.Options(lk, manager.Options{LeaderElection: true, LeaderElectionReleaseOnCancel: true})
	if err != nil {
		log.Fatal(err)
	}
	mgr, err := manager.New(config.GetConfigOrDie(), opts)
	if err != nil {
		log.Fatal(err)
	}
	err = mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		// ctx ends when the term does.
		term, err := lk.Term()
		if err != nil {
			return err
		}
		fmt.Println("fencing token", term.Token())
		<-ctx.Done()
		return nil
	}))
	if err != nil {
		log.Fatal(err)
	}
	if err := mgr.Start(context.Background()); err != nil {
		log.Fatal(err)
	}
}
