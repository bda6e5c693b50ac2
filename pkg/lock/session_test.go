package lock_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/etcdlock/etcdlock/pkg/clock"
	"github.com/etcdlock/etcdlock/pkg/clock/clocktest"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// The deadline is computed from the send time of the last successful
// renewal, on the session's clock, and the session is lost at that exact
// instant even though a renewal is still in flight.
func TestDeadlineFromSendTimeAndLossWithoutReply(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	p, url := etcdtest.Proxy(t, cluster.Endpoints()[0])
	cli := etcdtest.Client(t, url)
	t0 := time.Unix(1_000_000, 0)
	fc := newReadClock(t0)
	s := newSession(t, cli, lock.WithClock(fc), lock.WithTTL(6*time.Second))
	l, err := s.Acquire(ctx, "dl")
	if err != nil {
		t.Fatal(err)
	}
	const ttl, margin, every = 6 * time.Second, 600 * time.Millisecond, 2 * time.Second
	if s.TTL() != ttl {
		t.Fatalf("granted TTL %v, want %v", s.TTL(), ttl)
	}
	if want := t0.Add(ttl - margin); !s.Deadline().Equal(want) {
		t.Fatalf("initial deadline %v, want grant send time + TTL - margin = %v", s.Deadline(), want)
	}
	if got := remaining(s, fc); got != ttl-margin {
		t.Errorf("Remaining() = %v, want %v", got, ttl-margin)
	}

	waiters := func(n int) {
		t.Helper()
		etcdtest.Eventually(t, 10*time.Second, func() bool { return fc.Waiters() == n }, "fake clock waiters")
	}
	waiters(2) // renewal timer and watchdog
	fc.Step(every)
	d1 := t0.Add(every + ttl - margin)
	etcdtest.Eventually(t, 10*time.Second, func() bool { return s.Deadline().Equal(d1) }, "renewal did not move the deadline to send time + TTL - margin")

	// Hold the next renewal's reply while the clock moves on: the deadline
	// must count from when the renewal was sent, not when the reply came.
	waiters(2)
	p.PauseRx()
	fc.drain()
	fc.Step(every)
	fc.awaitRead(t) // the renewal took its send time
	fc.Step(300 * time.Millisecond)
	p.UnpauseRx()
	d2 := t0.Add(2*every + ttl - margin)
	etcdtest.Eventually(t, 10*time.Second, func() bool { return s.Deadline().Equal(d2) }, "deadline not computed from the send time")

	// Cut the network: the next renewal is sent and never answered.
	p.BlackholeTx()
	p.BlackholeRx()
	waiters(2)
	fc.SetTime(t0.Add(3 * every))
	waiters(1) // only the watchdog: the renewal is in flight
	fc.SetTime(d2.Add(-time.Nanosecond))
	waiters(1)
	if s.Err() != nil || l.Err() != nil {
		t.Fatalf("lost before the deadline: %v, %v", s.Err(), l.Err())
	}
	fc.SetTime(d2)
	select {
	case <-s.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("session not lost at its deadline while a renewal hung")
	}
	waitLost(t, l, lock.ErrDeadlinePassed, 10*time.Second, "its session was lost")
	if !errors.Is(s.Err(), lock.ErrSessionLost) || !errors.Is(s.Err(), lock.ErrDeadlinePassed) {
		t.Errorf("session err = %v, want ErrSessionLost/ErrDeadlinePassed", s.Err())
	}
	if !errors.Is(l.Err(), lock.ErrLost) || !errors.Is(l.Err(), lock.ErrDeadlinePassed) {
		t.Errorf("lock err = %v", l.Err())
	}
	var lost *lock.LostError
	if !errors.As(s.Err(), &lost) || !lost.At.Equal(d2) {
		t.Errorf("loss time %v, want %v", lost, d2)
	}

	// Loss is final: the network heals and the clock moves on, but the
	// session's timers have stopped (no renewal is due, ever), and a
	// round trip over the healed connection revives nothing.
	p.UnblackholeTx()
	p.UnblackholeRx()
	fc.Step(10 * every)
	waiters(0)
	// The blackhole dropped bytes mid-stream: the first request may find
	// the connection broken, and the client dials it again.
	etcdtest.Eventually(t, 10*time.Second, func() bool {
		_, err := cli.Get(ctx, "healed")
		return err == nil
	}, "no round trip over the healed connection")
	if !errors.Is(l.Err(), lock.ErrLost) || remaining(s, clock.Real()) != 0 {
		t.Errorf("after the network healed: lock %v remaining %v", l.Err(), remaining(s, clock.Real()))
	}
}

// readClock is a fake clock that signals each reading of its time, so a
// test can wait until the session has read it before moving it on.
type readClock struct {
	*clocktest.Fake
	reads chan struct{} // one pending signal at most
}

func newReadClock(t time.Time) readClock {
	return readClock{clocktest.NewFake(t), make(chan struct{}, 1)}
}

func (c readClock) Now() time.Time {
	now := c.Fake.Now()
	select {
	case c.reads <- struct{}{}:
	default: // a signal is pending already
	}
	return now
}

// drain forgets the readings so far.
func (c readClock) drain() {
	select {
	case <-c.reads:
	default:
	}
}

// awaitRead waits for a reading since the last drain.
func (c readClock) awaitRead(t *testing.T) {
	t.Helper()
	select {
	case <-c.reads:
	case <-time.After(10 * time.Second):
		t.Fatal("the clock was not read")
	}
}

func TestGrantedTTLIsUsed(t *testing.T) {
	t.Parallel()
	fc := clocktest.NewFake(time.Unix(1_000_000, 0))
	s := newSession(t, client(t), lock.WithTTL(time.Second), lock.WithClock(fc))
	// etcd raises TTLs below ceil(1.5 × election timeout) = 2s by default.
	if s.TTL() != 2*time.Second {
		t.Fatalf("TTL() = %v, want etcd's minimum 2s", s.TTL())
	}
	if want := 2*time.Second - 250*time.Millisecond; remaining(s, fc) != want {
		t.Errorf("Remaining() = %v, want granted TTL - 250ms margin = %v", remaining(s, fc), want)
	}
}

func TestRenewalKeepsSessionAlive(t *testing.T) {
	t.Parallel()
	var renewed renewals
	s := newSession(t, client(t), lock.WithTTL(2*time.Second), renewed.option())
	l, err := s.Acquire(testCtx(t), "alive")
	if err != nil {
		t.Fatal(err)
	}
	first := s.Deadline()
	renewed.wait(t, 4) // a TTL and more: three intervals of a third of the TTL between four renewals
	if s.Err() != nil || l.Err() != nil {
		t.Fatalf("session %v lock %v after a TTL of renewals", s.Err(), l.Err())
	}
	if !s.Deadline().After(first) {
		t.Errorf("deadline not renewed: %v", s.Deadline())
	}
}

func TestSessionOptionsValidated(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	for name, opt := range map[string]lock.SessionOption{
		"ttl below 1s":     lock.WithTTL(500 * time.Millisecond),
		"empty owner":      lock.WithOwner(""),
		"nil logger":       lock.WithLogger(nil),
		"prefix no slash":  lock.WithPrefix("/locks"),
		"zero margin":      lock.WithSafetyMargin(0),
		"negative renew":   lock.WithRenewInterval(-time.Second),
		"nil clock":        lock.WithClock(nil),
		"zero cleanup":     lock.WithCleanupTimeout(0),
		"margin above ttl": lock.WithSafetyMargin(time.Minute),
		"renew above ttl":  lock.WithRenewInterval(time.Minute),
		// Near the largest Duration, rounding up to seconds used to wrap
		// to a negative TTL, for which etcd grants its minimum.
		"ttl max duration": lock.WithTTL(math.MaxInt64),
		"ttl above max":    lock.WithTTL(maxTTL + time.Second),
		// margin + interval used to wrap below the TTL.
		"margin max duration": lock.WithSafetyMargin(math.MaxInt64),
	} {
		t.Run(name, func(t *testing.T) {
			s, err := lock.NewSession(ctx, cli, opt)
			if err == nil {
				s.Close(ctx)
				t.Fatal("NewSession accepted a bad option")
			}
			if !errors.Is(err, lock.ErrInvalidOption) {
				t.Errorf("err = %v, want ErrInvalidOption", err)
			}
		})
	}
	if _, err := lock.NewSession(ctx, nil); !errors.Is(err, lock.ErrInvalidOption) {
		t.Errorf("nil client: %v", err)
	}
}

func TestNewSessionUnreachable(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, "http://127.0.0.1:1")
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := lock.NewSession(ctx, cli); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("NewSession against no server = %v, want deadline exceeded", err)
	}
}

// A session whose lease etcd answered is gone sends no revoke on Close:
// etcd's client would log the refusal as a warning on every such Close.
func TestCloseAfterLeaseRevokedSendsNoRevoke(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	core, logs := observer.New(zap.DebugLevel)
	cli, err := clientv3.New(clientv3.Config{Endpoints: cluster.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	s, err := lock.NewSession(ctx, cli, lock.WithPrefix(prefix(t)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client(t).Revoke(ctx, s.Lease()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
	case <-ctx.Done():
		t.Fatal("the session never noticed its lease revoked")
	}
	if !errors.Is(s.Err(), lock.ErrLeaseRevoked) {
		t.Fatalf("session ended with %v, want ErrLeaseRevoked", s.Err())
	}
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close = %v, want nil", err)
	}
	if revokes := logs.FilterField(zap.String("method", "/etcdserverpb.Lease/LeaseRevoke")); revokes.Len() != 0 {
		t.Errorf("the client logged %d revokes: %v", revokes.Len(), revokes.All())
	}
	if err := s.Close(ctx); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
}
