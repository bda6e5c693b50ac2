package lock_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// WithWaitHook is called once when, and only when, an acquisition waits:
// behind a holder, for a semaphore slot, for one name of a set; not for a
// free name, a free slot or a refusal.
func TestWaitHookOnlyWhenTheAcquisitionWaits(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	holder, s := newSession(t, cli), newSession(t, cli)
	var calls atomic.Int64
	hook := lock.WithWaitHook(func() { calls.Add(1) })
	noWait := func(what string, acquire func() (*lock.Lock, error), wantErr error) {
		t.Helper()
		calls.Store(0)
		l, err := acquire()
		if !errors.Is(err, wantErr) {
			t.Fatalf("%s: %v, want %v", what, err, wantErr)
		}
		if l != nil {
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if n := calls.Load(); n != 0 {
			t.Errorf("%s: wait hook called %d times, want none", what, n)
		}
	}
	waits := func(what string, acquire func() (*lock.Lock, error), release func()) {
		t.Helper()
		calls.Store(0)
		got := make(chan *lock.Lock, 1)
		go func() {
			l, err := acquire()
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		etcdtest.Eventually(t, 20*time.Second, func() bool { return calls.Load() > 0 }, what+": the wait hook was never called")
		select {
		case <-got:
			t.Fatalf("%s: acquired while the name was held", what)
		default:
		}
		release()
		if l := <-got; l != nil {
			_ = l.Release(ctx)
		}
		if n := calls.Load(); n != 1 {
			t.Errorf("%s: wait hook called %d times, want once", what, n)
		}
	}

	noWait("a free name", func() (*lock.Lock, error) { return s.Acquire(ctx, "free", hook) }, nil)
	h, err := holder.Acquire(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	noWait("another kind", func() (*lock.Lock, error) { return s.Acquire(ctx, "held", hook, lock.WithLimit(2)) }, lock.ErrLimitMismatch)
	var locked *lock.LockedError
	calls.Store(0)
	if _, err := s.TryAcquire(ctx, "held", hook); !errors.As(err, &locked) || calls.Load() != 0 {
		t.Errorf("TryAcquire of a held name: %v, hook called %d times; want a LockedError and none", err, calls.Load())
	}
	waits("a held name", func() (*lock.Lock, error) { return s.Acquire(ctx, "held", hook) }, func() { _ = h.Release(ctx) })

	h, err = holder.AcquireAll(ctx, []string{"s2"})
	if err != nil {
		t.Fatal(err)
	}
	waits("a set with one name held", func() (*lock.Lock, error) { return s.AcquireAll(ctx, []string{"s1", "s2", "s3"}, hook) },
		func() { _ = h.Release(ctx) })

	one, err := holder.Acquire(ctx, "pool", lock.WithLimit(2))
	if err != nil {
		t.Fatal(err)
	}
	noWait("a free slot", func() (*lock.Lock, error) { return s.Acquire(ctx, "pool", hook, lock.WithLimit(2)) }, nil)
	two, err := newSession(t, cli).Acquire(ctx, "pool", lock.WithLimit(2))
	if err != nil {
		t.Fatal(err)
	}
	waits("no free slot", func() (*lock.Lock, error) { return s.Acquire(ctx, "pool", hook, lock.WithLimit(2)) }, func() { _ = two.Release(ctx) })
	_ = one.Release(ctx)

	if _, err := s.Acquire(ctx, "x", lock.WithWaitHook(nil)); !errors.Is(err, lock.ErrInvalidOption) {
		t.Errorf("WithWaitHook(nil): %v, want ErrInvalidOption", err)
	}
}
