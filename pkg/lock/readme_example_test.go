package lock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/fencing/etcdfence"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// The snippets of README.md and pkg/lock/README.md, compiled (not run):
// TestReadmeSnippets in hack/snippets checks that each snippet's lines are
// in one of these functions, in order.

// README.md: acquire, fence a write, learn of a loss.
func Example_readme() {
	ctx, logger, report, done := context.Background(), zap.NewNop(), "report", make(chan struct{})
	cli, _ := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:2379"}})
	session, err := lock.NewSession(ctx, cli, lock.WithTTL(10*time.Second), lock.WithLogger(logger)) // logger: a *zap.Logger
	if err != nil {
		log.Fatal(err)
	}
	defer session.Close(context.Background())

	l, err := session.Acquire(ctx, "nightly-report") // blocks, FIFO; TryAcquire does not
	if err != nil {
		log.Fatal(err)
	}
	defer l.Release(context.Background()) // compare-and-delete; safe to retry

	// Work under l.Context(): it is canceled the moment the lock is lost.
	// Send l.Token() with every write and let the resource check it atomically:
	_, err = etcdfence.Commit(l.Context(), cli, l.Key(), l.Token(),
		clientv3.OpPut("/reports/latest", report))
	if errors.Is(err, fencing.ErrStaleToken) {
		return // a newer owner exists: stop
	}

	select {
	case <-l.Context().Done(): // deadline passed, renewal refused, key deleted
		log.Print(l.Err()) // errors.Is(err, lock.ErrDeadlinePassed) etc.
	case <-done:
	}
}

// pkg/lock/README.md: a semaphore's slots, fenced per slot.
func Example_readmeSemaphore() {
	ctx, session, guard := context.Background(), (*lock.Session)(nil), &fencing.Guard{}
	write := func() error { return nil }
	l, err := session.Acquire(ctx, "transcode", lock.WithLimit(4))
	// l.Slot() is in [0, 4); l.Token() increases per slot:
	err = guard.Do(fmt.Sprintf("transcode/%d", l.Slot()), l.Token(), write)
	_ = err
}

// pkg/lock/README.md: a reader and a writer.
func Example_readmeShared() {
	ctx, session, other := context.Background(), (*lock.Session)(nil), (*lock.Session)(nil)
	r, err := session.Acquire(ctx, "catalog", lock.WithShared()) // a reader
	w, err := other.Acquire(ctx, "catalog")                      // a writer: every plain Acquire
	_, _, _ = r, w, err
}

// pkg/lock/README.md: several names at once.
func Example_readmeAcquireAll() {
	ctx, session := context.Background(), (*lock.Session)(nil)
	l, err := session.AcquireAll(ctx, []string{"account/1", "account/2"})
	// l.Keys(), one per name; one l.Token() for the set
	_, _ = l, err
}

// pkg/lock/README.md: a lock-delay for every lock of a session.
func Example_readmeLockDelay() {
	ctx, cli := context.Background(), (*clientv3.Client)(nil)
	session, err := lock.NewSession(ctx, cli, lock.WithLockDelay(5*time.Second))
	_, _ = session, err
}
