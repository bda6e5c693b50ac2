package lock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// retryDelay is long enough that a retry with a 1 s ctx ends inside it.
const retryDelay = 3 * time.Second

// loseByDelete acquires name on s, deletes its key as an operator would,
// waits until s notices and Releases the dead lock (as a defer does), and
// returns when etcd saw the key deleted.
func loseByDelete(t *testing.T, s *lock.Session, name string) time.Time {
	t.Helper()
	ctx, cli := testCtx(t), lock.ClientOf(s)
	l, err := s.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	gone := deletedAt(t, cli, l.Key())
	deleteAndLose(t, cli, l)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-gone:
		return at
	case <-time.After(10 * time.Second):
		t.Fatal("the deletion was never seen")
	}
	return time.Time{}
}

// activeNotBefore acquires name on s and fails t if it became active less
// than d after end (seen by the test's watch: never earlier than etcd's
// own deletion).
func activeNotBefore(t *testing.T, s *lock.Session, name string, end time.Time, d time.Duration, what string) *lock.Lock {
	t.Helper()
	l, err := s.Acquire(testCtx(t), name)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(end); took < d {
		t.Errorf("%s: the next holder was ACTIVE %v after the unclean end, want >= %v", what, took, d)
	}
	return l
}

// TestLockDelayHoldsWhateverTheEndingSessionDoes: after an unclean end the
// ending session retries the name and that retry fails (its ctx ends, its
// session closes meanwhile, a TryAcquire times out); no contender of
// another session becomes ACTIVE less than the delay after the end.
func TestLockDelayHoldsWhateverTheEndingSessionDoes(t *testing.T) {
	t.Parallel()
	retries := map[string]func(t *testing.T, s *lock.Session){
		"acquire-timeout": func(t *testing.T, s *lock.Session) {
			ctx, cancel := context.WithTimeout(testCtx(t), time.Second)
			defer cancel()
			if l, err := s.Acquire(ctx, "job"); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("the retry inside the delay = %v, %v; want the ctx's deadline", l, err)
			}
		},
		"close-while-waiting": func(t *testing.T, s *lock.Session) {
			ctx := testCtx(t)
			done := make(chan error, 1)
			go func() {
				_, err := s.Acquire(ctx, "job")
				done <- err
			}()
			waitMarkers(t, s, "job", 2)
			if err := s.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err == nil {
				t.Fatal("an Acquire waiting out the delay succeeded although its session closed")
			}
		},
		"tryacquire-timeout": func(t *testing.T, s *lock.Session) {
			ctx, cancel := context.WithTimeout(testCtx(t), 500*time.Millisecond)
			defer cancel()
			if l, err := s.TryAcquire(ctx, "job"); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("the retry inside the delay = %v, %v; want the ctx's deadline", l, err)
			}
		},
	}
	for name, retry := range retries {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cli := client(t)
			s1 := newSession(t, cli, lock.WithLockDelay(retryDelay))
			end := loseByDelete(t, s1, "job")
			retry(t, s1)
			s2 := newSession(t, cli, lock.WithLockDelay(retryDelay))
			l2 := activeNotBefore(t, s2, "job", end, retryDelay, name)

			// The holder that followed ends uncleanly in turn: the next
			// contender waits a whole delay from that end, not the rest of
			// a delay started for the first.
			gone := deletedAt(t, cli, l2.Key())
			if _, err := cli.Delete(testCtx(t), l2.Key()); err != nil {
				t.Fatal(err)
			}
			end2 := <-gone
			s3 := newSession(t, cli, lock.WithLockDelay(retryDelay))
			l3 := activeNotBefore(t, s3, "job", end2, retryDelay, name+", then the next holder deleted")
			_ = l3.Release(testCtx(t))
		})
	}
}

// waitMarkers waits until name has n lock-delay markers: an acquisition
// waiting out the delay has written its own beside the stale one.
func waitMarkers(t *testing.T, s *lock.Session, name string, n int) {
	t.Helper()
	var ms []string
	etcdtest.Eventually(t, time.Minute, func() bool {
		ms = delayMarkers(t, lock.ClientOf(s), name)
		return len(ms) == n
	}, fmt.Sprintf("%s never had %d markers", name, n))
}

// TestLockDelayLongestApplies: the delay applied after an unclean end is
// the longest of the ending holder's and the contender's.
func TestLockDelayLongestApplies(t *testing.T) {
	t.Parallel()
	const short, long = 2 * time.Second, 4 * time.Second
	for _, c := range []struct{ holder, contender time.Duration }{{long, short}, {short, long}} {
		t.Run(fmt.Sprintf("holder-%v-contender-%v", c.holder, c.contender), func(t *testing.T) {
			t.Parallel()
			cli := client(t)
			s1 := newSession(t, cli, lock.WithLockDelay(c.holder))
			end := loseByDelete(t, s1, "job")
			s2 := newSession(t, cli, lock.WithLockDelay(c.contender))
			l := activeNotBefore(t, s2, "job", end, long, "mixed delays")
			_ = l.Release(testCtx(t))
		})
	}
}

// TestLockDelayManyFailedReleasesThenClose: a session whose Releases failed
// and were retried successfully, many times over, still ends cleanly with
// Close: no marker stays, the next holder does not wait.
func TestLockDelayManyFailedReleasesThenClose(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	s1 := newSession(t, cli, lock.WithLockDelay(retryDelay))
	dead, cancel := context.WithCancel(ctx)
	cancel()
	for i := range 130 {
		l, err := s1.Acquire(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(dead); err == nil {
			t.Fatalf("cycle %d: Release on a canceled ctx succeeded", i)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("cycle %d: retried Release: %v", i, err)
		}
	}
	// Locks whose first Release failed, still held at Close.
	for _, name := range []string{"job", "other"} {
		l, err := s1.Acquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(dead); err == nil {
			t.Fatal("Release on a canceled ctx succeeded")
		}
	}
	if err := s1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	waitMarkers(t, s1, "job", 0)
	s2 := newSession(t, cli, lock.WithLockDelay(retryDelay))
	from, err := cli.Get(ctx, "a-key-nobody-writes")
	if err != nil {
		t.Fatal(err)
	}
	l2, err := s2.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Release(ctx)
	if ds := delayWrites(t, ctx, cli, from.Header.Revision); len(ds) != 0 {
		t.Errorf("after a clean Close the next holder started a delay: %v", ds)
	}
}

// TestLockDelayCleanEndReplacedByTheNextAcquisition: a Release that fails
// and is followed at once by the session's next acquisition of the name
// (which replaces the key left behind) is a clean end: that acquisition
// does not wait out a delay, and no marker of the earlier one stays.
func TestLockDelayCleanEndReplacedByTheNextAcquisition(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	s := newSession(t, cli, lock.WithLockDelay(retryDelay))
	l1, err := s.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	dead, cancel := context.WithCancel(ctx)
	cancel()
	if err := l1.Release(dead); err == nil {
		t.Fatal("Release on a canceled ctx succeeded")
	}
	actx, cancel := context.WithTimeout(ctx, retryDelay-time.Second) // below the delay
	defer cancel()
	l2, err := s.Acquire(actx, "job")
	if err != nil {
		t.Fatalf("the next acquisition after a failed (clean) Release: %v", err)
	}
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	waitMarkers(t, s, "job", 0)
}

// TestLockDelayPassedWhileNobodyWaited: every contender gave up inside the
// delay; one that comes after it passed does not wait it out again.
func TestLockDelayPassedWhileNobodyWaited(t *testing.T) {
	t.Parallel()
	cli := client(t)
	s1 := newSession(t, cli, lock.WithLockDelay(retryDelay))
	loseByDelete(t, s1, "job")
	s2 := newSession(t, cli, lock.WithLockDelay(retryDelay))
	// A try's timeout is below the delay, so a try that waited the delay
	// out again would fail; it leaves the call room on a loaded machine.
	try := func() error {
		ctx, cancel := context.WithTimeout(testCtx(t), retryDelay-time.Second)
		defer cancel()
		l, err := s2.TryAcquire(ctx, "job")
		if err == nil {
			return l.Release(testCtx(t))
		}
		return err
	}
	if err := try(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a try inside the delay = %v, want the ctx's deadline", err)
	}
	// The delay passes: its timer, a key with a lease of the delay, expires.
	timing := func() bool {
		return slices.ContainsFunc(keysUnder(t, cli, prefix(t)), func(k string) bool { return strings.Contains(k, "%delay/") })
	}
	if !timing() {
		t.Fatal("no lock-delay timer after a try inside the delay")
	}
	etcdtest.Eventually(t, time.Minute, func() bool { return !timing() }, "the lock-delay's timer never expired")
	if err := try(); err != nil {
		t.Fatalf("a try after the delay passed: %v", err)
	}
}
