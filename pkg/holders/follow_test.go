package holders_test

import (
	"context"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/pkg/holders"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// Follow reports the name free, then each holder in turn; a waiter
// joining wakes no one; it returns nil once its context ends.
func TestFollowReportsEachChangeOfHolder(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	fctx, stop := context.WithCancel(ctx)
	statuses, done := make(chan holders.Status, 16), make(chan error, 1)
	go func() {
		done <- holders.Follow(fctx, cli, prefix(t), "job", func(st holders.Status) bool {
			statuses <- st
			return true
		})
	}()
	owner := func(st holders.Status) string {
		if st.Holder == nil {
			return ""
		}
		return st.Holder.Owner
	}
	next := func(want string) {
		t.Helper()
		for {
			select {
			case st := <-statuses:
				if owner(st) == want {
					return
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("Follow did not report holder %q", want)
			}
		}
	}
	next("")
	a := newSession(t, cli, lock.WithOwner("alice"))
	la, err := a.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	next("alice")
	b := newSession(t, cli, lock.WithOwner("bob"))
	bob := queueWaiter(t, ctx, b, "job", 2)
	select {
	case st := <-statuses:
		t.Errorf("a waiter joining was reported: %+v", st)
	case <-time.After(500 * time.Millisecond):
	}
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	next("bob")
	if lb := <-bob; lb.err != nil {
		t.Fatal(lb.err)
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Follow returned %v after its context ended, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Follow did not return after its context ended")
	}
}

// Follow of a semaphore watches the holder's contender key: a release
// reports the next holder.
func TestFollowSemaphore(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	a := newSession(t, cli, lock.WithOwner("alice"))
	la, err := a.Acquire(ctx, "pool", lock.WithLimit(1))
	if err != nil {
		t.Fatal(err)
	}
	b := newSession(t, cli, lock.WithOwner("bob"))
	bob := queueWaiter(t, ctx, b, "pool", 2, lock.WithLimit(1))
	fctx, stop := context.WithCancel(ctx)
	seen, done := make(chan string, 16), make(chan struct{})
	go func() {
		defer close(done)
		holders.Follow(fctx, cli, prefix(t), "pool", func(st holders.Status) bool {
			if st.Holder != nil {
				seen <- st.Holder.Owner
			}
			return st.Holder == nil || st.Holder.Owner != "bob"
		})
	}()
	defer func() { stop(); <-done }()
	if got := <-seen; got != "alice" {
		t.Fatalf("first holder %q, want alice", got)
	}
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-seen:
		if got != "bob" {
			t.Errorf("next holder %q, want bob", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Follow did not report the next holder")
	}
	if lb := <-bob; lb.err != nil {
		t.Fatal(lb.err)
	}
}

// Follow reports holders joining a name that is already held: a
// semaphore's second holder, a second reader; and their leaving.
func TestFollowReportsHoldersJoining(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind string
		opt  lock.AcquireOption
	}{{"semaphore", lock.WithLimit(3)}, {"readers", lock.WithShared()}} {
		t.Run(tc.kind, func(t *testing.T) {
			t.Parallel()
			ctx, cli := testCtx(t), client(t)
			fctx, stop := context.WithCancel(ctx)
			counts, done := make(chan int, 16), make(chan struct{})
			go func() {
				defer close(done)
				holders.Follow(fctx, cli, prefix(t), "n", func(st holders.Status) bool {
					counts <- len(st.Holders)
					return true
				})
			}()
			defer func() { stop(); <-done }()
			next := func(want int) {
				t.Helper()
				select {
				case got := <-counts:
					if got != want {
						t.Fatalf("Follow reported %d holders, want %d", got, want)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("Follow did not report %d holders", want)
				}
			}
			next(0)
			var held []*lock.Lock
			for i := 1; i <= 3; i++ {
				l, err := newSession(t, cli).Acquire(ctx, "n", tc.opt)
				if err != nil {
					t.Fatal(err)
				}
				held = append(held, l)
				next(i)
			}
			for i := 2; i >= 0; i-- {
				if err := held[i].Release(ctx); err != nil {
					t.Fatal(err)
				}
				next(i)
			}
		})
	}
}
