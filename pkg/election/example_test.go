package election_test

import (
	"context"
	"fmt"
	"log"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/election"
	"github.com/etcdlock/etcdlock/pkg/embedded"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// A controller that reconciles while it leads, fencing every write with
// its term's token.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	etcd, err := embedded.Start(ctx) // or your cluster
	if err != nil {
		log.Fatal(err)
	}
	defer etcd.Close()
	cli, err := clientv3.New(clientv3.Config{Endpoints: etcd.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()

	var store fencing.Guard // stands in for a fenced database or API
	e, err := election.New(election.Config{
		Client:          cli,
		Name:            "my-controller",
		ReleaseOnCancel: true,
		Callbacks: election.Callbacks{
			OnStartedLeading: func(ctx context.Context, term election.Term) {
				// Reconcile until ctx ends; every write carries term.Token.
				err := store.Do("desired-state", term.Token, func() error { return nil })
				fmt.Println("leading; fenced write:", err == nil)
				cancel() // end the example
				<-ctx.Done()
			},
			OnStoppedLeading: func() { fmt.Println("stopped leading") },
			OnNewLeader:      func(id string) { log.Println("leader is", id) },
		},
	}, lock.WithOwner("replica-1"), lock.WithTTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	if err := e.Run(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// leading; fenced write: true
	// stopped leading
}
