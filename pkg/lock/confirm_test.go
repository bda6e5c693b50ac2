package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// Confirm says whether the lock is still held, and a key it finds gone
// loses the lock with the cause its watch would have given: a delete while
// the lease lives, or a revoke.
func TestConfirm(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	for _, end := range []string{"delete", "revoke", "release"} {
		t.Run(end, func(t *testing.T) {
			s := newSession(t, cli)
			l, err := s.Acquire(ctx, end)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Confirm(ctx); err != nil {
				t.Fatalf("Confirm of a held lock = %v", err)
			}
			var want error
			switch end {
			case "delete":
				want = lock.ErrKeyDeleted
				_, err = cli.Delete(ctx, l.Key())
			case "revoke":
				want = lock.ErrLeaseRevoked
				_, err = cli.Revoke(ctx, s.Lease())
			case "release":
				want = lock.ErrReleased
				err = l.Release(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}
			// Whether the watch or Confirm finds the key gone first, the
			// lock ends with the same cause.
			if err := l.Confirm(ctx); !errors.Is(err, want) || err != l.Err() {
				t.Errorf("Confirm after the %s = %v, want the lock's error (%v) matching %v", end, err, l.Err(), want)
			}
			if l.Err() == nil || l.Context().Err() == nil {
				t.Errorf("after the %s Confirm saw, the lock is %v", end, l.Err())
			}
		})
	}
}

// A Confirm that etcd does not answer changes nothing: the lock stays
// held until its deadline.
func TestConfirmWithoutAnswerKeepsTheLock(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	p, url := etcdtest.Proxy(t, cluster.Endpoints()[0])
	s := newSession(t, etcdtest.Client(t, url), lock.WithTTL(30*time.Second))
	l, err := s.Acquire(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	p.BlackholeTx()
	p.BlackholeRx()
	defer func() { p.UnblackholeTx(); p.UnblackholeRx() }()
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := l.Confirm(cctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Confirm cut off = %v, want context.DeadlineExceeded", err)
	}
	if l.Err() != nil {
		t.Errorf("a Confirm without answer ended the lock: %v", l.Err())
	}
}
