package lock_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/pkg/holders"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

func TestSemaphoreAdmitsLimitInOrder(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	const n = 3
	var held []*lock.Lock
	slots := map[int]bool{}
	for i := range n {
		l, err := newSession(t, cli).Acquire(ctx, "pool", lock.WithLimit(n))
		if err != nil {
			t.Fatalf("holder %d of %d: %v", i, n, err)
		}
		if s := l.Slot(); s < 0 || s >= n || slots[s] {
			t.Fatalf("holder %d got slot %d; held slots %v", i, s, slots)
		}
		slots[l.Slot()] = true
		if !strings.Contains(l.Key(), "%slot/") {
			t.Errorf("Key() = %q, want the slot key", l.Key())
		}
		resp, err := cli.Get(ctx, l.Key())
		if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].CreateRevision != int64(l.Token()) {
			t.Fatalf("slot key %s: %v %v; want create revision = token %v", l.Key(), resp, err, l.Token())
		}
		held = append(held, l)
	}
	// Two waiters, in order.
	w1 := queueWaiter(t, ctx, newSession(t, cli), "pool", n+1, lock.WithLimit(n))
	w2 := queueWaiter(t, ctx, newSession(t, cli), "pool", n+2, lock.WithLimit(n))
	mustNotReceive(t, w1, 300*time.Millisecond, "the semaphore is full")

	st, err := holders.Inspect(ctx, cli, prefix(t), "pool")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Holders) != n || len(st.Waiters) != 2 {
		t.Fatalf("Inspect: %d holders %d waiters, want %d and 2", len(st.Holders), len(st.Waiters), n)
	}
	for _, h := range st.Holders {
		if h.Slot < 0 || h.Limit != n {
			t.Errorf("holder %+v: want a slot and limit %d", h, n)
		}
	}

	// Releasing the middle holder frees its slot for the first waiter.
	freed := held[1]
	if err := freed.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l1 := mustReceive(t, w1, "a holder released")
	if l1.Slot() != freed.Slot() || l1.Token() <= freed.Token() {
		t.Errorf("first waiter: slot %d token %v; want the freed slot %d with a token above %v", l1.Slot(), l1.Token(), freed.Slot(), freed.Token())
	}
	mustNotReceive(t, w2, 300*time.Millisecond, "the semaphore is full again")
	if err := held[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	l2 := mustReceive(t, w2, "another holder released")
	if l2.Slot() != held[0].Slot() {
		t.Errorf("second waiter slot %d, want %d", l2.Slot(), held[0].Slot())
	}
}

func TestSemaphoreRefusesMixedLimits(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	if _, err := newSession(t, cli).Acquire(ctx, "pool", lock.WithLimit(2)); err != nil {
		t.Fatal(err)
	}
	s := newSession(t, cli)
	if _, err := s.Acquire(ctx, "pool", lock.WithLimit(3)); !errors.Is(err, lock.ErrLimitMismatch) {
		t.Fatalf("Acquire with limit 3 beside limit 2 = %v, want ErrLimitMismatch", err)
	}
	if _, err := s.TryAcquire(ctx, "pool", lock.WithLimit(3)); !errors.Is(err, lock.ErrLimitMismatch) {
		t.Fatalf("TryAcquire with limit 3 beside limit 2 = %v, want ErrLimitMismatch", err)
	}
	if n := len(keysUnder(t, cli, namePrefix(t, prefix(t), "pool"))); n != 1 {
		t.Errorf("%d contender keys after refused acquisitions, want 1", n)
	}
	// Nor does a plain lock, a reader or a set queue behind it: each
	// would get its token before the semaphore holders claimed theirs.
	if _, err := s.Acquire(ctx, "pool"); !errors.Is(err, lock.ErrLimitMismatch) {
		t.Errorf("plain Acquire behind a semaphore = %v, want ErrLimitMismatch", err)
	}
	if _, err := s.Acquire(ctx, "pool", lock.WithShared()); !errors.Is(err, lock.ErrLimitMismatch) {
		t.Errorf("reader behind a semaphore = %v, want ErrLimitMismatch", err)
	}
	if _, err := s.TryAcquire(ctx, "pool", lock.WithShared()); !errors.Is(err, lock.ErrLimitMismatch) {
		t.Errorf("reader TryAcquire beside a semaphore = %v, want ErrLimitMismatch", err)
	}
	if _, err := s.AcquireAll(ctx, []string{"other", "pool"}); !errors.Is(err, lock.ErrLimitMismatch) {
		t.Errorf("AcquireAll with a semaphore's name = %v, want ErrLimitMismatch", err)
	}
	if keys := keysUnder(t, cli, prefix(t)); len(keys) != 2 {
		t.Errorf("keys after the refusals: %v, want the semaphore holder's two", keys)
	}
	// And a semaphore does not queue behind a plain lock.
	if _, err := newSession(t, cli).Acquire(ctx, "plain"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, "plain", lock.WithLimit(2)); !errors.Is(err, lock.ErrLimitMismatch) {
		t.Fatalf("semaphore Acquire behind a plain lock = %v, want ErrLimitMismatch", err)
	}
	if _, err := s.Acquire(ctx, "pool", lock.WithLimit(2), lock.WithShared()); !errors.Is(err, lock.ErrInvalidOption) {
		t.Errorf("WithLimit with WithShared = %v, want ErrInvalidOption", err)
	}
	if _, err := s.Acquire(ctx, "pool", lock.WithLimit(0)); !errors.Is(err, lock.ErrInvalidOption) {
		t.Errorf("WithLimit(0) = %v, want ErrInvalidOption", err)
	}
}

func TestSemaphoreTryAcquireTakesAFreeSlotAndIsRefusedWhenFull(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	a, err := newSession(t, cli).TryAcquire(ctx, "pool", lock.WithLimit(2))
	if err != nil {
		t.Fatal(err)
	}
	b, err := newSession(t, cli).TryAcquire(ctx, "pool", lock.WithLimit(2))
	if err != nil {
		t.Fatalf("second TryAcquire of a limit-2 semaphore: %v", err)
	}
	if a.Slot() == b.Slot() {
		t.Fatalf("both holders in slot %d", a.Slot())
	}
	s := newSession(t, cli)
	var locked *lock.LockedError
	if _, err := s.TryAcquire(ctx, "pool", lock.WithLimit(2)); !errors.As(err, &locked) {
		t.Fatalf("third TryAcquire = %v, want a *LockedError", err)
	}
	if got := len(keysUnder(t, cli, prefix(t))); got != 4 {
		t.Errorf("%d keys under the prefix, want 4 (two contenders, two slots)", got)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := s.TryAcquire(ctx, "pool", lock.WithLimit(2))
	if err != nil {
		t.Fatalf("TryAcquire after a release: %v", err)
	}
	if c.Slot() != a.Slot() || c.Token() <= a.Token() {
		t.Errorf("slot %d token %v, want slot %d and a token above %v", c.Slot(), c.Token(), a.Slot(), a.Token())
	}
}

// TestSemaphoreSlotDeletedLosesHolder deletes a holder's slot key as an
// operator would: the holder must notice, like a mutex holder whose key
// is deleted.
func TestSemaphoreSlotDeletedLosesHolder(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	l, err := newSession(t, cli).Acquire(ctx, "pool", lock.WithLimit(2))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Delete(ctx, l.Key()); err != nil {
		t.Fatal(err)
	}
	waitLost(t, l, lock.ErrKeyDeleted, 20*time.Second, "the slot key was deleted")
}

// TestSemaphoreManyWaiters queues more waiters than the limit and releases
// them one by one: every holder set stays within the limit and each
// holder's slot is free when it gets it.
func TestSemaphoreManyWaiters(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	const n, waiters = 2, 12
	res := make(chan acquired, waiters)
	for i := range waiters {
		s := newSession(t, cli)
		go func() {
			l, err := s.Acquire(ctx, "pool", lock.WithLimit(n))
			res <- acquired{l, err}
		}()
		_ = i
	}
	bySlot := map[int]*lock.Lock{}
	for got := 0; got < waiters; got++ {
		a := <-res
		if a.err != nil {
			t.Fatal(a.err)
		}
		if prev := bySlot[a.l.Slot()]; prev != nil && prev.Err() == nil {
			t.Fatalf("slot %d handed to token %v while token %v holds it", a.l.Slot(), a.l.Token(), prev.Token())
		}
		bySlot[a.l.Slot()] = a.l
		active := 0
		for _, l := range bySlot {
			if l.Err() == nil {
				active++
			}
		}
		if active > n {
			t.Fatalf("%d holders active, limit %d", active, n)
		}
		if got >= n-1 {
			// Release one to let the next in.
			for _, l := range bySlot {
				if l.Err() == nil {
					if err := l.Release(ctx); err != nil {
						t.Fatal(err)
					}
					break
				}
			}
		}
	}
	_ = fmt.Sprint
	_ = clientv3.WithPrefix
}
