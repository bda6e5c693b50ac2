package lock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/pkg/holders"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// TestLockDelayAfterAnUncleanEnd: a holder whose session is abandoned (its
// lease then expires) or whose lock is broken makes the next holder wait
// the delay after the key went; a released or closed one does not.
func TestLockDelayAfterAnUncleanEnd(t *testing.T) {
	t.Parallel()
	const delay = 2 * time.Second
	for _, end := range []string{"abandon", "break", "release", "close"} {
		t.Run(end, func(t *testing.T) {
			t.Parallel()
			ctx, cli := testCtx(t), client(t)
			s1 := newSession(t, cli, lock.WithLockDelay(delay), lock.WithTTL(2*time.Second))
			l1, err := s1.Acquire(ctx, "job")
			if err != nil {
				t.Fatal(err)
			}
			gone := deletedAt(t, cli, l1.Key())
			s2 := newSession(t, cli, lock.WithLockDelay(delay))
			w := queueWaiter(t, ctx, s2, "job", 2)
			from, err := cli.Get(ctx, "a-key-nobody-writes")
			if err != nil {
				t.Fatal(err)
			}
			switch end {
			case "abandon":
				s1.Abandon()
			case "break":
				if _, err := holders.Force(ctx, cli, prefix(t), "job", l1.Token()); err != nil {
					t.Fatal(err)
				}
			case "release":
				if err := l1.Release(ctx); err != nil {
					t.Fatal(err)
				}
			case "close":
				if err := s1.Close(ctx); err != nil {
					t.Fatal(err)
				}
			}
			var at time.Time
			select {
			case at = <-gone:
			case <-time.After(10 * time.Second):
				t.Fatal("the first holder's key never went")
			}
			l2 := mustReceive(t, w, "the first holder ended")
			took := time.Since(at)
			clean := end == "release" || end == "close"
			if !clean && took < delay-100*time.Millisecond {
				t.Errorf("after %s the next holder was active %v after the key went, want at least the lock-delay %v", end, took, delay)
			}
			if clean {
				if ds := delayWrites(t, ctx, cli, from.Header.Revision); len(ds) != 0 {
					t.Errorf("after a clean %s the next holder started a delay: %v", end, ds)
				}
			}
			// The next holder removed the orphan marker; its own goes
			// with its Release.
			if err := l2.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if keys := keysUnder(t, cli, prefix(t)); len(keys) != 0 {
				t.Errorf("keys after the second holder released: %v", keys)
			}
		})
	}
}

// TestLockDelayAppliesToTryAcquireAndOwnLoss: TryAcquire waits the delay
// out, and a session's own earlier acquisition lost uncleanly counts.
func TestLockDelayAppliesToTryAcquireAndOwnLoss(t *testing.T) {
	t.Parallel()
	const delay = 1500 * time.Millisecond
	ctx := testCtx(t)
	cli, watched := watchedClient(t)
	s := newSession(t, cli, lock.WithLockDelay(delay))
	l := acquireWatched(t, s, watched, "job")
	deleteAndLose(t, cli, l)
	start := time.Now()
	l2, err := s.TryAcquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < delay {
		t.Errorf("TryAcquire after the session's own lock was lost took %v, want the lock-delay %v", took, delay)
	}
	_ = l2.Release(ctx)
}

func TestLockDelayOptions(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	if err := lock.ValidateSessionOptions(lock.WithLockDelay(-time.Second)); !errors.Is(err, lock.ErrInvalidOption) {
		t.Errorf("negative lock-delay = %v, want ErrInvalidOption", err)
	}
	s := newSession(t, cli, lock.WithLockDelay(time.Second))
	for name, o := range map[string]lock.AcquireOption{"WithLimit": lock.WithLimit(2), "WithShared": lock.WithShared()} {
		if _, err := s.Acquire(ctx, "x", o); !errors.Is(err, lock.ErrInvalidOption) {
			t.Errorf("lock-delay with %s = %v, want ErrInvalidOption", name, err)
		}
	}
	if _, err := s.AcquireAll(ctx, []string{"x", "y"}); !errors.Is(err, lock.ErrInvalidOption) {
		t.Errorf("AcquireAll on a session with a lock-delay = %v, want ErrInvalidOption", err)
	}
	// Off for one acquisition.
	if _, err := s.Acquire(ctx, "x", lock.WithLimit(2), lock.WithLockDelay(0)); err != nil {
		t.Errorf("semaphore with the session's lock-delay turned off: %v", err)
	}
}
