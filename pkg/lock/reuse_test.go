package lock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// A Release that fails (here: its context is already canceled) leaves the
// key in etcd. The session's next Acquire of the name must get a new token,
// and retrying the failed Release — documented as always safe — must not
// free the new lock.
func TestFailedReleaseThenReacquire(t *testing.T) {
	t.Parallel()
	for _, try := range []bool{false, true} {
		name := map[bool]string{false: "acquire", true: "try-acquire"}[try]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cli := testCtx(t), client(t)
			s := newSession(t, cli)
			acquire := s.Acquire
			if try {
				acquire = s.TryAcquire
			}
			old, err := acquire(ctx, "r")
			if err != nil {
				t.Fatal(err)
			}
			canceled, cancel := context.WithCancel(ctx)
			cancel()
			if err := old.Release(canceled); !errors.Is(err, context.Canceled) {
				t.Fatalf("Release(canceled) = %v, want context.Canceled", err)
			}
			if keys := keysUnder(t, cli, prefix(t)); len(keys) != 1 {
				t.Fatalf("keys after the failed release = %v, want the old key still there", keys)
			}

			next, err := acquire(ctx, "r")
			if err != nil {
				t.Fatal(err)
			}
			if next.Token() <= old.Token() {
				t.Fatalf("new lock's token %v, want above the markers lock's %v", next.Token(), old.Token())
			}
			if err := old.Release(ctx); err != nil {
				t.Fatalf("retried Release = %v, want nil", err)
			}
			if keys := keysUnder(t, cli, prefix(t)); len(keys) != 1 || keys[0] != next.Key() {
				t.Fatalf("keys after the retried release = %v, want the new lock's", keys)
			}
			other := newSession(t, cli)
			if l, err := other.TryAcquire(ctx, "r"); !errors.Is(err, lock.ErrLocked) {
				if l != nil {
					l.Release(ctx)
				}
				t.Fatalf("another session's TryAcquire while the new lock is held = %v, want ErrLocked", err)
			}
			if next.Err() != nil {
				t.Errorf("new lock ended: %v", next.Err())
			}
		})
	}
}

// Many quick cycles on one session, each release failing first and
// retried after the next acquisition: every acquisition's token is new,
// and no retried release ever ends a later lock.
func TestFailedReleasesNeverShareTokens(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	s := newSession(t, cli)
	seen := map[int64]bool{}
	var pending *lock.Lock
	for i := range 40 {
		l, err := s.Acquire(ctx, "q")
		if err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		if seen[int64(l.Token())] {
			t.Fatalf("cycle %d: token %v handed out twice", i, l.Token())
		}
		seen[int64(l.Token())] = true
		if pending != nil {
			if err := pending.Release(ctx); err != nil {
				t.Fatalf("cycle %d: retried release: %v", i, err)
			}
			if l.Err() != nil {
				t.Fatalf("cycle %d: a retried release ended the next lock: %v", i, l.Err())
			}
		}
		short, cancel := context.WithTimeout(ctx, time.Duration(i%3)*time.Microsecond)
		if err := l.Release(short); err != nil {
			pending = l
		} else {
			pending = nil
		}
		cancel()
	}
}

// An Acquire or TryAcquire whose context ends while its write is in flight
// must not leave its key behind: the clean-up runs while etcd may still
// apply the put, and a key that lands after it is swept at a later renewal.
// Deadlines are swept across one uncontended round trip, so that many calls
// end exactly while their write is in flight.
func TestTimedOutAcquireLeavesNoKey(t *testing.T) {
	t.Parallel()
	for _, try := range []bool{false, true} {
		name := map[bool]string{false: "acquire", true: "try-acquire"}[try]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cli := testCtx(t), client(t)
			var renewals atomic.Int64
			s := newSession(t, cli, lock.WithTTL(3*time.Second), // renewed every second
				lock.WithMetrics(renewCounter{func() { renewals.Add(1) }}))
			acquire := s.Acquire
			if try {
				acquire = s.TryAcquire
			}
			t0 := time.Now()
			l, err := acquire(ctx, "n")
			if err != nil {
				t.Fatal(err)
			}
			rtt := time.Since(t0)
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			failed, left := 0, 0
			for i := range 150 {
				actx, cancel := context.WithTimeout(ctx, time.Duration(i%30)*rtt/20)
				l, err := acquire(actx, "n")
				cancel()
				if err == nil {
					if err := l.Release(ctx); err != nil {
						t.Fatal(err)
					}
					continue
				}
				failed++
				// A key that landed before its clean-up is gone now; one
				// that landed after is removed by the sweeps of the next
				// renewals (every second, three sweeps). One that lands
				// after this check is left to the check after the loop.
				sweeps := renewals.Load() + 4
				for keys := keysUnder(t, cli, prefix(t)); len(keys) > 0; keys = keysUnder(t, cli, prefix(t)) {
					if renewals.Load() >= sweeps {
						left++
						t.Errorf("iteration %d: failed %v left %v", i, err, keys)
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			if failed == 0 {
				t.Fatal("no call failed: the deadlines never cut a write short")
			}
			// A put still in flight when its iteration found no key lands
			// later: once more renewals have run than a leftover key is swept
			// for, no key may be left.
			after := renewals.Load() + 4
			etcdtest.Eventually(t, 10*time.Second, func() bool { return renewals.Load() >= after },
				"the session stopped renewing")
			if keys := keysUnder(t, cli, prefix(t)); len(keys) > 0 {
				left++
				t.Errorf("after the last sweeps: left %v", keys)
			}
			t.Logf("%d of 150 calls failed, %d left a key", failed, left)
		})
	}
}
