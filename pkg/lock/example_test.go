package lock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/pkg/embedded"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

func Example() {
	ctx := context.Background()
	etcd, err := embedded.Start(ctx) // or your cluster's endpoints
	if err != nil {
		log.Fatal(err)
	}
	defer etcd.Close()
	cli, err := clientv3.New(clientv3.Config{Endpoints: etcd.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()

	session, err := lock.NewSession(ctx, cli, lock.WithTTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer session.Close(context.Background())

	l, err := session.Acquire(ctx, "nightly-report")
	if err != nil {
		log.Fatal(err)
	}
	// Do the work under l.Context() and send l.Token() with every write.
	work := l.Context()
	fmt.Println("state:", l.State(), "token valid:", l.Token().IsValid(), "work canceled:", work.Err() != nil)

	if err := l.Release(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("state:", l.State(), "work canceled:", work.Err() != nil)
	// Output:
	// state: active token valid: true work canceled: false
	// state: released work canceled: true
}

func ExampleSession_TryAcquire() {
	ctx := context.Background()
	etcd, err := embedded.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer etcd.Close()
	cli, err := clientv3.New(clientv3.Config{Endpoints: etcd.Endpoints()})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()

	alice, _ := lock.NewSession(ctx, cli, lock.WithOwner("alice"))
	defer alice.Close(ctx)
	bob, _ := lock.NewSession(ctx, cli, lock.WithOwner("bob"))
	defer bob.Close(ctx)

	if _, err := alice.TryAcquire(ctx, "deploy"); err != nil {
		log.Fatal(err)
	}
	_, err = bob.TryAcquire(ctx, "deploy")
	var held *lock.LockedError
	if errors.As(err, &held) {
		fmt.Println("deploy is held by", held.Owner)
	}
	// Output: deploy is held by alice
}
