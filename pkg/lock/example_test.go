package lock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/pkg/embedded"
	"github.com/etcdlock/etcdlock/pkg/holders"
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
	fmt.Println("err:", l.Err(), "token valid:", l.Token().IsValid(), "work canceled:", work.Err() != nil)

	if err := l.Release(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("err:", l.Err(), "work canceled:", work.Err() != nil)
	// Output:
	// err: <nil> token valid: true work canceled: false
	// err: lock: released work canceled: true
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

// Three workers may hold "gpu" at once; each gets a slot, and fences its
// part of the resource with the slot's token.
func ExampleWithLimit() {
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

	var slots []int
	for range 3 {
		s, err := lock.NewSession(ctx, cli)
		if err != nil {
			log.Fatal(err)
		}
		defer s.Close(ctx)
		l, err := s.Acquire(ctx, "gpu", lock.WithLimit(3))
		if err != nil {
			log.Fatal(err)
		}
		// A fenced write: guard.Do(fmt.Sprintf("gpu/%d", l.Slot()), l.Token(), ...)
		slots = append(slots, l.Slot())
	}
	fourth, _ := lock.NewSession(ctx, cli)
	defer fourth.Close(ctx)
	_, err = fourth.TryAcquire(ctx, "gpu", lock.WithLimit(3))
	fmt.Println("slots:", slots, "fourth refused:", errors.Is(err, lock.ErrLocked))
	// Output: slots: [0 1 2] fourth refused: true
}

// Readers share "catalog"; a writer waits for them, and readers that come
// after the writer wait for it.
func ExampleWithShared() {
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

	r1, err := alice.Acquire(ctx, "catalog", lock.WithShared())
	if err != nil {
		log.Fatal(err)
	}
	r2, err := bob.Acquire(ctx, "catalog", lock.WithShared())
	if err != nil {
		log.Fatal(err)
	}
	st, _ := holders.Inspect(ctx, cli, lock.DefaultPrefix, "catalog")
	fmt.Println("readers holding:", len(st.Holders))

	writer, _ := lock.NewSession(ctx, cli, lock.WithOwner("carol"))
	defer writer.Close(ctx)
	_, err = writer.TryAcquire(ctx, "catalog")
	fmt.Println("writer while readers hold:", errors.Is(err, lock.ErrLocked))
	r1.Release(ctx)
	r2.Release(ctx)
	w, err := writer.TryAcquire(ctx, "catalog")
	fmt.Println("writer after the readers:", err == nil, w.Token() > r2.Token())
	// Output:
	// readers holding: 2
	// writer while readers hold: true
	// writer after the readers: true true
}

// Two transfers lock the same two accounts, listed in opposite orders:
// each takes both or waits, and neither can deadlock the other.
func ExampleSession_AcquireAll() {
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

	first, err := alice.AcquireAll(ctx, []string{"account/1", "account/2"})
	if err != nil {
		log.Fatal(err)
	}
	second := make(chan *lock.Lock)
	go func() {
		l, err := bob.AcquireAll(ctx, []string{"account/2", "account/1"})
		if err != nil {
			log.Fatal(err)
		}
		second <- l
	}()
	fmt.Println("alice holds", len(first.Keys()), "names with one token:", first.Token().IsValid())
	first.Release(ctx)
	l := <-second
	fmt.Println("then bob holds", len(l.Keys()), "names with a later token:", l.Token() > first.Token())
	// Output:
	// alice holds 2 names with one token: true
	// then bob holds 2 names with a later token: true
}

// A holder that ends without releasing (here: its session abandoned, as a
// crashed process's would be) makes the next holder wait the lock-delay.
func ExampleWithLockDelay() {
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

	const delay = 500 * time.Millisecond
	crashed, _ := lock.NewSession(ctx, cli, lock.WithTTL(2*time.Second), lock.WithLockDelay(delay))
	if _, err := crashed.Acquire(ctx, "ledger"); err != nil {
		log.Fatal(err)
	}
	crashed.Abandon() // its lease expires in about 2 s

	next, _ := lock.NewSession(ctx, cli, lock.WithLockDelay(delay))
	defer next.Close(ctx)
	start := time.Now()
	l, err := next.Acquire(ctx, "ledger")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("waited for the expiry and the delay:", time.Since(start) > delay)
	l.Release(ctx) // a clean end: the next holder will not wait
	// Output: waited for the expiry and the delay: true
}
