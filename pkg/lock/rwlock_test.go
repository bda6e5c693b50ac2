package lock_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/pkg/holders"
	"github.com/etcdlock/etcdlock/pkg/internal/keyspace"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

func TestReadersShareWritersQueue(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	s1, s2, s3, s4 := newSession(t, cli), newSession(t, cli), newSession(t, cli), newSession(t, cli)
	r1, err := s1.Acquire(ctx, "db", lock.WithShared())
	if err != nil {
		t.Fatal(err)
	}
	r2, err := s2.Acquire(ctx, "db", lock.WithShared())
	if err != nil {
		t.Fatalf("second reader while a reader holds: %v", err)
	}
	w := queueWaiter(t, ctx, s3, "db", 3)
	r3 := queueWaiter(t, ctx, s4, "db", 4, lock.WithShared())

	st, err := holders.Inspect(ctx, cli, prefix(t), "db")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Holders) != 2 || st.Holders[0].Token != r1.Token() || st.Holders[1].Token != r2.Token() || len(st.Waiters) != 2 || st.Waiters[1].Shared != true {
		t.Fatalf("Inspect: holders %+v waiters %+v; want the two readers holding, the writer and a reader waiting", st.Holders, st.Waiters)
	}

	// A reader behind a waiting writer waits: no writer starvation.
	mustNotReceive(t, r3, 300*time.Millisecond, "a writer waits for the name")
	if err := r1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	mustNotReceive(t, w, 300*time.Millisecond, "a reader still holds the name")
	if err := r2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wl := mustReceive(t, w, "both readers released")
	if wl.Token() <= r2.Token() {
		t.Errorf("writer token %v; want above the readers' %v, %v", wl.Token(), r1.Token(), r2.Token())
	}
	mustNotReceive(t, r3, 300*time.Millisecond, "the writer holds the name")
	if err := wl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	rl := mustReceive(t, r3, "the writer released")
	if rl.Token() <= wl.Token() {
		t.Errorf("reader after the writer: token %v, want above %v", rl.Token(), wl.Token())
	}
}

func TestTryAcquireShared(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	s1, s2, s3 := newSession(t, cli), newSession(t, cli), newSession(t, cli, lock.WithOwner("writer"))
	r1, err := s1.TryAcquire(ctx, "db", lock.WithShared())
	if err != nil {
		t.Fatal(err)
	}
	r2, err := s2.TryAcquire(ctx, "db", lock.WithShared())
	if err != nil {
		t.Fatalf("TryAcquire(WithShared) while only a reader holds: %v", err)
	}
	if _, err := s3.TryAcquire(ctx, "db"); !errors.Is(err, lock.ErrLocked) {
		t.Fatalf("writer TryAcquire while readers hold = %v, want ErrLocked", err)
	}
	w := queueWaiter(t, ctx, s3, "db", 3)
	_ = r2.Release(ctx)
	waitQueued(t, cli, "db", 2)
	var locked *lock.LockedError
	if _, err := s2.TryAcquire(ctx, "db", lock.WithShared()); !errors.As(err, &locked) {
		t.Fatalf("reader TryAcquire while a writer waits = %v, want a *LockedError", err)
	}
	if locked.Token != r1.Token() {
		t.Errorf("LockedError names %q with token %v, want the holder, the first reader, with %v", locked.Owner, locked.Token, r1.Token())
	}
	if n := len(keysUnder(t, cli, namePrefix(t, prefix(t), "db"))); n != 2 {
		t.Errorf("%d keys after a failed TryAcquire, want 2 (reader and writer)", n)
	}
	_ = r1.Release(ctx)
	mustReceive(t, w, "the last reader released")
}

// TestReaderFindsWriterBeyondAPage puts a writer behind more readers than
// one read returns: the new reader must still wait for it.
func TestReaderFindsWriterBeyondAPage(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	s := newSession(t, cli)
	pfx := namePrefix(t, prefix(t), "db")
	grant, err := cli.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Revoke(testCtx(t), grant.ID) })
	put := func(key string, shared bool) {
		v, _ := json.Marshal(keyspace.Record{Owner: "other", Shared: shared})
		if _, err := cli.Put(ctx, pfx+key, string(v), clientv3.WithLease(grant.ID)); err != nil {
			t.Fatal(err)
		}
	}
	put("w", false)
	for i := range 150 {
		put(fmt.Sprintf("r%03d", i), true)
	}
	r := queueWaiter(t, ctx, s, "db", 152, lock.WithShared())
	mustNotReceive(t, r, 300*time.Millisecond, "a writer 150 readers back holds the name")
	if _, err := cli.Delete(ctx, pfx+"w"); err != nil {
		t.Fatal(err)
	}
	mustReceive(t, r, "the writer's key was deleted")
}
