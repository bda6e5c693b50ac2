// Command demo tells the worker-a / worker-b story against a real embedded
// etcd: a paused lock holder loses its lock, a new holder takes over with a
// larger fencing token, and the old holder's late write and late release
// are both refused.
//
//	go run ./hack/demo
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/fencing/etcdfence"
	"github.com/etcdlock/etcdlock/pkg/embedded"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

var start = time.Now()

func say(who, format string, args ...any) {
	fmt.Printf("[%5.2fs] %-9s %s\n", time.Since(start).Seconds(), who, fmt.Sprintf(format, args...))
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	etcd, err := embedded.Start(ctx)
	if err != nil {
		return err
	}
	defer etcd.Close()
	say("etcd", "embedded etcd serving on %s", etcd.Endpoints()[0])

	// worker-a reaches etcd through a proxy so the demo can freeze it, as
	// a long GC pause or a network partition would.
	pause, aURL, err := startProxy(etcd.Endpoints()[0])
	if err != nil {
		return err
	}
	defer pause.Close()
	cliA, err := newClient(aURL)
	if err != nil {
		return err
	}
	defer cliA.Close()
	cliB, err := newClient(etcd.Endpoints()...)
	if err != nil {
		return err
	}
	defer cliB.Close()

	const name, resource = "orders", "/demo/orders/total"
	a, err := lock.NewSession(ctx, cliA, lock.WithOwner("worker-a"), lock.WithTTL(2*time.Second))
	if err != nil {
		return err
	}
	defer a.Close(context.Background())
	b, err := lock.NewSession(ctx, cliB, lock.WithOwner("worker-b"), lock.WithTTL(2*time.Second))
	if err != nil {
		return err
	}
	defer b.Close(context.Background())

	la, err := a.Acquire(ctx, name)
	if err != nil {
		return err
	}
	say("worker-a", "acquired %q with fencing token %s (lease TTL %v, deadline in %v)", name, la.Token(), a.TTL(), a.Remaining().Round(time.Millisecond))
	if err := write(ctx, cliB, la, resource, "100 (written by worker-a)"); err != nil {
		return err
	}
	say("worker-a", "wrote %s = 100 with token %s: accepted", resource, la.Token())

	gotB := make(chan *lock.Lock, 1)
	errB := make(chan error, 1)
	go func() {
		l, err := b.Acquire(ctx, name)
		if err != nil {
			errB <- err
			return
		}
		gotB <- l
	}()
	say("worker-b", "waiting for %q", name)

	pause.PauseTx()
	pause.PauseRx()
	say("worker-a", "PAUSED (nothing it sends or receives moves; it cannot renew its lease)")

	<-la.Lost()
	say("worker-a", "lock LOST locally: %v — it stops work before etcd can expire the lease", la.Err())

	var lb *lock.Lock
	select {
	case lb = <-gotB:
	case err := <-errB:
		return err
	}
	var lost *lock.LostError
	if errors.As(la.Err(), &lost) {
		say("etcd", "expired worker-a's lease and deleted its key, %v after worker-a had stopped", time.Since(lost.At).Round(time.Millisecond))
	}
	say("worker-b", "acquired %q with fencing token %s (> %s)", name, lb.Token(), la.Token())
	if err := write(ctx, cliB, lb, resource, "250 (written by worker-b)"); err != nil {
		return err
	}
	say("worker-b", "wrote %s = 250 with token %s: accepted", resource, lb.Token())

	pause.UnpauseTx()
	pause.UnpauseRx()
	say("worker-a", "RESUMED, unaware of the pause, sends its late write with token %s", la.Token())
	err = write(ctx, cliA, la, resource, "999 (late write by worker-a)")
	var stale *fencing.StaleTokenError
	if !errors.As(err, &stale) {
		return fmt.Errorf("late write was not rejected as stale: %v", err)
	}
	say("resource", "REJECTED worker-a's write: %v", err)

	if err := retry(ctx, func() error { return la.Release(ctx) }); err != nil {
		return err
	}
	say("worker-a", "released its lock: compare-and-delete on token %s matched nothing", la.Token())
	if lb.State() != lock.StateActive {
		return fmt.Errorf("worker-b's lock is %v after worker-a's release", lb.State())
	}
	say("worker-b", "still holds %q (state %v)", name, lb.State())

	got, err := cliB.Get(ctx, resource)
	if err != nil {
		return err
	}
	say("resource", "final value: %s", got.Kvs[0].Value)
	if err := lb.Release(ctx); err != nil {
		return err
	}
	say("worker-b", "released %q", name)
	return nil
}

// write is a fenced write to an etcd key: it commits only while the
// writer's lock key still exists with the writer's token.
func write(ctx context.Context, cli *clientv3.Client, l *lock.Lock, key, value string) error {
	return retry(ctx, func() error {
		_, err := etcdfence.Commit(ctx, cli, l.Key(), l.Token(), clientv3.OpPut(key, value))
		return err
	})
}

// retry repeats fn after transport errors (worker-a's connection is reset
// when it resumes); a stale token is an answer, not a transport error.
func retry(ctx context.Context, fn func() error) error {
	var err error
	for range 20 {
		if err = fn(); err == nil || errors.Is(err, fencing.ErrStaleToken) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return err
}

func newClient(endpoints ...string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
}
