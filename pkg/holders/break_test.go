package holders_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/pkg/detached"
	"github.com/etcdlock/etcdlock/pkg/holders"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

type broke struct {
	h        holders.Contender
	released bool
	err      error
}

// breakIn runs Break with wait in the background; Force if force is set.
func breakIn(t *testing.T, ctx context.Context, l *lock.Lock, wait time.Duration, force bool) <-chan broke {
	t.Helper()
	out := make(chan broke, 1)
	cli := client(t)
	go func() {
		if force {
			h, err := holders.Force(ctx, cli, prefix(t), l.Name(), l.Token())
			out <- broke{h, false, err}
			return
		}
		h, released, err := holders.Break(ctx, cli, prefix(t), l.Name(), l.Token(), wait)
		out <- broke{h, released, err}
	}()
	return out
}

// Break asks the holder, whose lock is lost with ErrBreakRequested while
// its key stays: the waiter gets the name only once the holder released
// it, and Break then reports that it did.
func TestBreakAsksTheHolderFirst(t *testing.T) {
	t.Parallel()
	for _, kind := range []struct {
		name string
		opts []lock.AcquireOption
	}{{"mutex", nil}, {"semaphore", []lock.AcquireOption{lock.WithLimit(1 + 1)}}, {"reader", []lock.AcquireOption{lock.WithShared()}}} {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			ctx, cli := testCtx(t), client(t)
			// Renewals, and the sweeps of keys a loss leaves, every 100 ms.
			holder := newSession(t, cli, lock.WithOwner("holder"), lock.WithRenewInterval(100*time.Millisecond))
			l, err := holder.Acquire(ctx, "job", kind.opts...)
			if err != nil {
				t.Fatal(err)
			}
			// A writer waits behind a reader, a third party behind a
			// semaphore's two slots.
			n := 2
			if kind.name == "semaphore" {
				if _, err := newSession(t, cli).Acquire(ctx, "job", kind.opts...); err != nil {
					t.Fatal(err)
				}
				n = 3
			}
			wopts := kind.opts
			if kind.name == "reader" {
				wopts = nil
			}
			next := queueWaiter(t, ctx, newSession(t, cli), "job", n, wopts...)
			res := breakIn(t, ctx, l, time.Minute, false)
			waitLost(t, l, lock.ErrBreakRequested, 10*time.Second, "Break asked its holder")
			mustNotReceive(t, next, time.Second, "the holder was asked but has not released")
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			mustReceive(t, next, "the holder released after the request")
			r := <-res
			if r.err != nil || !r.released || r.h.Owner != "holder" {
				t.Errorf("Break = %+v, %v, %v; want the holder, released", r.h, r.released, r.err)
			}
		})
	}
}

// A set asked to release through one of its names keeps every name until
// it releases: the waiter on another name does not get it before.
func TestBreakOfASetKeepsItsOtherNames(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	holder := newSession(t, cli, lock.WithRenewInterval(100*time.Millisecond))
	l, err := holder.AcquireAll(ctx, []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	next := queueWaiter(t, ctx, newSession(t, cli), "b", 2)
	res := breakIn(t, ctx, l, time.Minute, false) // l.Name() is a
	waitLost(t, l, lock.ErrBreakRequested, 10*time.Second, "Break asked its holder")
	mustNotReceive(t, next, time.Second, "the set was asked to release a, and has released nothing")
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	mustReceive(t, next, "the set released")
	if r := <-res; r.err != nil || !r.released {
		t.Errorf("Break = %v, %v", r.released, r.err)
	}
}

// A holder that keeps renewing without releasing is fenced when the wait
// ends: its session is lost (lease revoked), and the name stays taken by
// its kept key until it releases, not freed at once.
func TestBreakFencesAHolderThatDoesNotRelease(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	holder := newSession(t, cli, lock.WithTTL(30*time.Second))
	l, err := holder.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	next := queueWaiter(t, ctx, newSession(t, cli), "job", 2)
	r := <-breakIn(t, ctx, l, 200*time.Millisecond, false)
	if r.err != nil || r.released {
		t.Fatalf("Break = %v, %v; want fenced (not released), no error", r.released, r.err)
	}
	select {
	case <-holder.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the fenced holder's session is not lost")
	}
	mustNotReceive(t, next, 300*time.Millisecond, "the holder was fenced but has not released, and the fence lasts 30s")
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	mustReceive(t, next, "the fenced holder released")
}

// holders.Force deletes the key at once: the waiter gets the name while the
// holder learns of it by its watch — as ErrKeyDeleted, or ErrLeaseRevoked
// when the revoke that follows the delete is heard of first.
func TestBreakForce(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	l, err := newSession(t, cli).Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	next := queueWaiter(t, ctx, newSession(t, cli), "job", 2)
	if r := <-breakIn(t, ctx, l, 0, true); r.err != nil || r.released {
		t.Fatalf("forced Break = %v, %v", r.released, r.err)
	}
	mustReceive(t, next, "the key was deleted by force")
	// The key's deletion or the lease's revoke, whichever it hears of first.
	waitLost(t, l, nil, 10*time.Second, "its key was deleted")
	if err := l.Err(); !errors.Is(err, lock.ErrKeyDeleted) && !errors.Is(err, lock.ErrLeaseRevoked) {
		t.Errorf("lost with %v, want ErrKeyDeleted or ErrLeaseRevoked", err)
	}
}

// A Detached grant has no session to answer: Break fences it without
// waiting, and the name stays taken until the grant is released.
func TestBreakDetachedIsFencedAtOnce(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	d, err := detached.New(cli, lock.WithPrefix(prefix(t)))
	if err != nil {
		t.Fatal(err)
	}
	g, err := d.Acquire(ctx, "job", "script", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	next := queueWaiter(t, ctx, newSession(t, cli), "job", 2)
	h, released, err := holders.Break(ctx, cli, prefix(t), "job", g.Token, time.Hour)
	if err != nil || released || h.Owner != "script" {
		t.Fatalf("Break of a detached grant = %+v, %v, %v; want fenced at once", h, released, err)
	}
	mustNotReceive(t, next, 300*time.Millisecond, "the grant was fenced, not deleted")
	if err := d.Release(ctx, "job", "script", g.Token); err != nil {
		t.Fatal(err)
	}
	mustReceive(t, next, "the fenced grant was released")
}

// A holder with a lock-delay that releases after a break request ends
// cleanly: the next holder with the delay does not wait it.
func TestBreakReleasedIsACleanEnd(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	const delay = time.Hour
	l, err := newSession(t, cli, lock.WithLockDelay(delay)).Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	next := queueWaiter(t, ctx, newSession(t, cli, lock.WithLockDelay(delay)), "job", 2)
	res := breakIn(t, ctx, l, time.Minute, false)
	waitLost(t, l, lock.ErrBreakRequested, 10*time.Second, "Break asked its holder")
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	mustReceive(t, next, "a clean end costs no lock-delay")
	if r := <-res; r.err != nil || !r.released {
		t.Errorf("Break = %v, %v", r.released, r.err)
	}
}

// A holder already gone when Break asks is ErrNotHeld; one that released
// before the request could be written is reported released.
func TestBreakOfAReleasedHolder(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	l, err := newSession(t, cli).Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := holders.Break(ctx, cli, prefix(t), "job", l.Token(), 0); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Break of a released lock = %v, want ErrNotHeld", err)
	}
}
