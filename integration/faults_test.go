package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// Scenario: the acquire request reaches etcd but its reply is lost. The
// caller sees an error; its retry finds the key the first attempt wrote and
// replaces it (a new token) instead of queueing behind itself; so does a
// script's retry (Detached), by owner.
func TestScenarioAcquireReplyLost(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, time.Minute)
	cliA, p := proxied(t, shared)
	cli := etcdtest.Client(t, shared.Endpoints()...)
	a := session(t, cliA, "a", lock.WithTTL(8*time.Second), lock.WithCleanupTimeout(300*time.Millisecond))

	p.BlackholeRx() // requests get through, replies do not
	actx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { _, err := a.Acquire(actx, "job"); errc <- err }()
	var key string
	var firstRev int64
	etcdtest.Eventually(t, 10*time.Second, func() bool { key, firstRev = holder(t, ctx, cli, "job"); return key != "" }, "the acquire request never reached etcd")
	p.BlackholeTx() // and a's clean-up after giving up is lost too
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("Acquire succeeded without a reply")
	}
	p.UnblackholeTx()
	p.UnblackholeRx()
	reconnected(t, ctx, cliA)

	// The caller retries, each attempt bounded: a self-deadlock (queueing
	// behind its own first key) would time out every attempt.
	var l *lock.Lock
	retry(t, func() (err error) {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		l, err = a.Acquire(rctx, "job")
		return err
	})
	// The retry is a new Acquire call: it replaces the first attempt's key
	// instead of adopting it, so no token belongs to two acquisitions.
	if l.Key() != key || l.Token() <= fencing.Token(firstRev) {
		t.Errorf("retry got %s/%v, want %s with a token above the first attempt's %d", l.Key(), l.Token(), key, firstRev)
	}
	waitQueued(t, ctx, cli, "job", 1)

	// Scripts: the acquire's reply never reached the script (it crashed
	// before reading it). Its retry replaces the grant by owner.
	d := newDetached(t, cli)
	if _, err := d.Acquire(ctx, "script", "cron-1", 8*time.Second); err != nil {
		t.Fatal(err)
	}
	_, srev := holder(t, ctx, cli, "script")
	g, err := d.Acquire(ctx, "script", "cron-1", 8*time.Second)
	if err != nil || g.Token <= fencing.Token(srev) {
		t.Errorf("detached retry = %+v, %v; want a grant with a token above %d", g, err, srev)
	}
	waitQueued(t, ctx, cli, "script", 1)
}

// Scenario: the release is applied but its reply is lost. Retrying is safe:
// it returns nil and does not touch the lock of whoever acquired meanwhile.
func TestScenarioReleaseReplyLost(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, time.Minute)
	cliA, p := proxied(t, shared)
	cli := etcdtest.Client(t, shared.Endpoints()...)
	a, b := session(t, cliA, "a", lock.WithTTL(8*time.Second)), session(t, cli, "b")
	la := acquire(t, ctx, a, "job")

	p.BlackholeRx()
	rctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	err := la.Release(rctx)
	cancel()
	if err == nil {
		t.Fatal("Release succeeded without a reply")
	}
	if !errors.Is(la.Err(), lock.ErrReleased) || la.Context().Err() == nil {
		t.Errorf("after a failed Release the lock is %v; work must stop anyway", la.Err())
	}
	lb := acquire(t, ctx, b, "job") // possible only because the delete was applied
	p.UnblackholeRx()
	reconnected(t, ctx, cliA)

	retry(t, func() error { return la.Release(ctx) })
	if key, tok := holder(t, ctx, cli, "job"); key != lb.Key() || fencing.Token(tok) != lb.Token() {
		t.Errorf("retried Release disturbed b: holder %s/%d", key, tok)
	}
	if lb.Err() != nil {
		t.Errorf("b is %v", lb.Err())
	}
}

// Scenario: delayed and reordered requests. A stale acquire, release or
// renew that reaches etcd late changes nothing.
func TestScenarioDelayedAndReorderedRequests(t *testing.T) {
	t.Parallel()
	t.Run("acquire", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t, time.Minute)
		cliA, p := proxied(t, shared)
		cli := etcdtest.Client(t, shared.Endpoints()...)
		// b holds through a's delay (4 s) and the write after it: a TTL
		// a loaded machine can renew (with 3 s, b is lost once a renewal's
		// round trip takes over 1.7 s).
		a, b := session(t, cliA, "a", lock.WithTTL(2*time.Second)), session(t, cli, "b", lock.WithTTL(15*time.Second))
		// Everything a sends now reaches etcd after its lease has expired.
		p.DelayTx(4*time.Second, 0)
		errc := make(chan error, 1)
		go func() { _, err := a.Acquire(ctx, "job"); errc <- err }()
		lb := acquire(t, ctx, b, "job") // overtakes a's request
		if err := <-errc; err == nil {
			t.Fatal("a's late acquire succeeded")
		}
		// Every delayed byte has arrived once a write a sends after them
		// has: the proxy forwards a connection's bytes in order.
		if _, err := cliA.Put(ctx, prefixOf(t)+"after-the-delayed", ""); err != nil {
			t.Fatal(err)
		}
		resp, err := cli.Get(ctx, prefixOf(t)+"job/", clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) != 1 || string(resp.Kvs[0].Key) != lb.Key() {
			t.Errorf("keys under job = %d (first %q), want only b's %s", len(resp.Kvs), resp.Kvs, lb.Key())
		}
		if lb.Err() != nil {
			t.Errorf("b is %v", lb.Err())
		}
	})
	t.Run("release", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t, time.Minute)
		cliA, p := proxied(t, shared)
		cli := etcdtest.Client(t, shared.Endpoints()...)
		a, b := session(t, cliA, "a", lock.WithTTL(8*time.Second)), session(t, cli, "b")
		la := acquire(t, ctx, a, "job")
		// An operator breaks a's lock; b acquires; a's release arrives late.
		p.DelayTx(time.Second, 0)
		if _, err := cli.Delete(ctx, la.Key()); err != nil {
			t.Fatal(err)
		}
		lb := acquire(t, ctx, b, "job")
		if err := la.Release(ctx); err != nil {
			t.Errorf("late release = %v, want nil", err)
		}
		if key, _ := holder(t, ctx, cli, "job"); key != lb.Key() {
			t.Errorf("late release freed b's lock; holder %q", key)
		}
	})
	t.Run("renew", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t, time.Minute)
		cliA, p := proxied(t, shared)
		cli := etcdtest.Client(t, shared.Endpoints()...)
		d := newDetached(t, cliA)
		g, err := d.Acquire(ctx, "job", "script", 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		p.DelayTx(4*time.Second, 0) // the renew arrives after expiry
		if _, err := d.Renew(ctx, "job", "script", g.Token); !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("late renew = %v, want ErrNotHeld", err)
		}
		if ttl, err := cli.TimeToLive(ctx, g.LeaseID); err != nil || ttl.TTL != -1 {
			t.Errorf("late renew revived the lease: %+v %v", ttl, err)
		}
		if key, _ := holder(t, ctx, cli, "job"); key != "" {
			t.Errorf("late renew revived key %s", key)
		}
	})
}
