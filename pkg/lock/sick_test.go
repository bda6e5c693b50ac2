package lock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/pkg/v3/proxy"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// returnsWithin runs call and fails t unless it returns within bound: a
// bound far above the one the call promises, which tells a call that
// returns from one that hangs, also on a loaded machine.
func returnsWithin(t *testing.T, bound time.Duration, what string, call func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- call() }()
	select {
	case err := <-done:
		return err
	case <-time.After(bound):
		t.Fatalf("%s still blocked after %v", what, bound)
		return nil
	}
}

// heldThroughProxy returns a lock held by a session (TTL 2 s) whose client
// reaches etcd through the returned proxy.
func heldThroughProxy(t *testing.T) (proxy.Server, *lock.Session, *lock.Lock) {
	t.Helper()
	p, url := etcdtest.Proxy(t, cluster.Endpoints()[0])
	s := newSession(t, etcdtest.Client(t, url), lock.WithTTL(2*time.Second))
	l, err := s.Acquire(testCtx(t), "job")
	if err != nil {
		t.Fatal(err)
	}
	return p, s, l
}

// NewSession with a ctx without a deadline, against an etcd nobody
// listens for, returns within DefaultTimeout with an error that names
// the cause and matches ErrUnavailable and the deadline.
func TestNewSessionUnreachableIsBounded(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, "http://"+etcdtest.FreeAddr(t))
	err := returnsWithin(t, 6*lock.DefaultTimeout, "NewSession(context.Background()) with etcd down", func() error {
		_, err := lock.NewSession(context.Background(), cli, lock.WithPrefix(prefix(t)))
		return err
	})
	if !errors.Is(err, lock.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("NewSession = %v, want ErrUnavailable and context.DeadlineExceeded", err)
	}
	if !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("NewSession = %v: does not name the refused connection", err)
	}
}

// Release of a lock whose session was lost returns at once, however long
// its ctx, with an error saying so: the lease, renewed no more, takes the
// key. The README's defer l.Release(context.Background()) cannot hang.
func TestReleaseAfterSessionLostReturns(t *testing.T) {
	t.Parallel()
	p, s, l := heldThroughProxy(t)
	p.BlackholeTx()
	p.BlackholeRx()
	t.Cleanup(func() { p.UnblackholeTx(); p.UnblackholeRx() })
	<-s.Done()
	err := returnsWithin(t, 30*time.Second, "Release(context.Background()) after the session was lost", func() error {
		return l.Release(context.Background())
	})
	if !errors.Is(err, lock.ErrSessionLost) {
		t.Fatalf("Release = %v, want ErrSessionLost", err)
	}
}

// A Release in flight when its session is lost returns with the loss: the
// lease takes the key.
func TestReleaseEndsWithItsSessionsLoss(t *testing.T) {
	t.Parallel()
	p, _, l := heldThroughProxy(t)
	p.PauseTx() // the release's delete waits in the proxy, as do the renewals
	t.Cleanup(p.UnpauseTx)
	err := returnsWithin(t, 30*time.Second, "Release(context.Background()) while etcd does not answer", func() error {
		return l.Release(context.Background())
	})
	if !errors.Is(err, lock.ErrSessionLost) && !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("Release = %v, want ErrSessionLost or ErrUnavailable", err)
	}
}

// With one member of three frozen (connections open, nothing answered)
// and a client that lists all three, new sessions, uncontended
// acquisitions and releases go through: a try the frozen member holds is
// given up and sent again to the next endpoint.
func TestSessionsAndLocksPastAFrozenMember(t *testing.T) {
	t.Parallel()
	_, cli, freeze := clusterBehindProxies(t)
	freeze()
	for i := range 6 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := lock.NewSession(ctx, cli, lock.WithPrefix(prefix(t)), lock.WithTTL(10*time.Second))
		if err != nil {
			t.Fatalf("NewSession %d with one member of three frozen: %v", i, err)
		}
		t.Cleanup(func() { s.Abandon() })
		l, err := s.Acquire(ctx, fmt.Sprintf("job-%d", i))
		if err != nil {
			t.Fatalf("Acquire %d with one member of three frozen: %v", i, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release %d with one member of three frozen: %v", i, err)
		}
	}
}

// A NewSession whose ctx ends while etcd's host cannot be found says so.
func TestNewSessionUnknownHostNamesIt(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, "http://no-such-host.invalid:2379")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := lock.NewSession(ctx, cli, lock.WithPrefix(prefix(t)))
	if !errors.Is(err, lock.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("NewSession = %v, want ErrUnavailable and context.DeadlineExceeded", err)
	}
	if !strings.Contains(err.Error(), "no-such-host.invalid") {
		t.Errorf("NewSession = %v: does not name the host it could not find", err)
	}
}

// A lease grant answered only after the deadline its lease would have —
// here every request reaches etcd 3 s late, past a 2 s TTL, as a grant
// does that waits for a new leader — gives no session already lost:
// NewSession fails, once its ctx ends, with ErrUnavailable and the ctx's
// error.
func TestNewSessionGrantedPastItsDeadline(t *testing.T) {
	t.Parallel()
	p, url := etcdtest.Proxy(t, cluster.Endpoints()[0])
	cli := etcdtest.Client(t, url)
	ctx, cancel := context.WithTimeout(testCtx(t), 10*time.Second)
	defer cancel()
	if _, err := cli.Get(ctx, "warm-up"); err != nil { // the connection, before the delay
		t.Fatal(err)
	}
	p.DelayTx(3*time.Second, 0)
	t.Cleanup(p.UndelayTx)
	s, err := lock.NewSession(ctx, cli, lock.WithPrefix(prefix(t)), lock.WithTTL(2*time.Second))
	if err == nil {
		defer s.Close(context.Background())
		t.Fatalf("NewSession returned a session (deadline %v ago, err %v); want an error", time.Since(s.Deadline()), s.Err())
	}
	if !errors.Is(err, lock.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("NewSession = %v, want ErrUnavailable and context.DeadlineExceeded", err)
	}
}

// With one member of three frozen and a client that lists all three, a
// contender that waits out the lock-delay after an unclean end (marker,
// timer and record writes, the delay's reads and deletes) gets the lock:
// each of those requests a try the frozen member holds is sent again to
// the next endpoint.
func TestLockDelayPastAFrozenMember(t *testing.T) {
	t.Parallel()
	c, cli, freeze := clusterBehindProxies(t)
	other := etcdtest.Client(t, c.Endpoints()[1:]...)
	freeze()
	for i := range 4 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		name := fmt.Sprintf("job-%d", i)
		holder := newSession(t, other, lock.WithTTL(2*time.Second))
		if _, err := holder.Acquire(ctx, name, lock.WithLockDelay(time.Second)); err != nil {
			t.Fatal(err)
		}
		holder.Abandon()
		if _, err := other.Revoke(ctx, holder.Lease()); err != nil { // an unclean end, at once
			t.Fatal(err)
		}
		s := newSession(t, cli, lock.WithTTL(30*time.Second)) // a loaded machine's renewals may be slow
		l, err := s.Acquire(ctx, name, lock.WithLockDelay(time.Second))
		if err != nil {
			t.Fatalf("Acquire %d after an unclean end with one member of three frozen: %v", i, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release %d with one member of three frozen: %v", i, err)
		}
	}
}

// With one member of three frozen and a client that lists all three, a
// semaphore's contenders get their slots: the first probe, a claim with
// the contender key, TryAcquire's claim and a waiter's claim once a slot
// is free are each sent again to the next endpoint when the frozen member
// holds a try.
func TestSemaphorePastAFrozenMember(t *testing.T) {
	t.Parallel()
	c, cli, freeze := clusterBehindProxies(t)
	other := etcdtest.Client(t, c.Endpoints()[1:]...)
	freeze()
	ttl := lock.WithTTL(30 * time.Second) // a loaded machine's renewals may be slow
	sessions := []*lock.Session{newSession(t, cli, ttl), newSession(t, cli, ttl), newSession(t, cli, ttl)}
	for i := range 3 {
		// A bound far above the hedged tries' (1 s, then 2 s, ...), also
		// on a loaded machine: a request held by the frozen member
		// without another beside it holds its step until the bound.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		name := fmt.Sprintf("job-%d", i)
		first, err := sessions[0].Acquire(ctx, name, lock.WithLimit(2)) // a free name: the probe claims
		if err != nil {
			t.Fatalf("Acquire %d of a free semaphore with one member of three frozen: %v", i, err)
		}
		second, err := sessions[1].TryAcquire(ctx, name, lock.WithLimit(2)) // one slot left: probe, then claim
		if err != nil {
			t.Fatalf("TryAcquire %d with one member of three frozen: %v", i, err)
		}
		third := make(chan error, 1)
		go func() { // queued behind two holders, claims once one releases
			l, err := sessions[2].Acquire(ctx, name, lock.WithLimit(2))
			if err == nil {
				err = l.Release(ctx)
			}
			third <- err
		}()
		waitQueued(t, other, name, 3)
		if err := first.Release(ctx); err != nil {
			t.Fatalf("Release %d with one member of three frozen: %v", i, err)
		}
		if err := <-third; err != nil {
			t.Fatalf("waiting Acquire %d with one member of three frozen: %v", i, err)
		}
		if err := second.Release(ctx); err != nil {
			t.Fatalf("Release %d with one member of three frozen: %v", i, err)
		}
	}
}
