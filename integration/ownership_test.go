package integration

import (
	"errors"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/fencing/etcdfence"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// Scenario: two clients acquire at once. Exactly one wins every round, the
// loser learns who holds it, and tokens increase round after round.
func TestScenarioTwoClientsAcquireAtOnce(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, time.Minute)
	cli := etcdtest.Client(t, shared.Endpoints()...)
	a, b := session(t, cli, "a"), session(t, cli, "b")
	var last fencing.Token
	const rounds = 50
	for round := range rounds {
		start := make(chan struct{})
		var wg sync.WaitGroup
		results := make([]*lock.Lock, 2)
		errs := make([]error, 2)
		for i, s := range []*lock.Session{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i], errs[i] = s.TryAcquire(ctx, "job")
			}()
		}
		close(start)
		wg.Wait()
		var winners []*lock.Lock
		var owner string
		for i := range 2 {
			switch {
			case errs[i] == nil:
				winners, owner = append(winners, results[i]), []string{"a", "b"}[i]
			case !errors.Is(errs[i], lock.ErrLocked):
				t.Fatalf("round %d: unexpected error %v", round, errs[i])
			}
		}
		if len(winners) != 1 {
			t.Fatalf("round %d: %d winners, want exactly 1 (errors %v)", round, len(winners), errs)
		}
		w := winners[0]
		if _, tok := holder(t, ctx, cli, "job"); fencing.Token(tok) != w.Token() {
			t.Fatalf("round %d: etcd holder token %d, winner's %v", round, tok, w.Token())
		}
		if w.Token() <= last {
			t.Fatalf("round %d: token %v not above previous %v", round, w.Token(), last)
		}
		last = w.Token()
		var locked *lock.LockedError
		for _, err := range errs {
			if err != nil && (!errors.As(err, &locked) || locked.Owner != owner || locked.Token != w.Token()) {
				t.Fatalf("round %d: loser's error %v does not name winner %s/%v", round, err, owner, w.Token())
			}
		}
		if err := w.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// Scenario: the owner dies without releasing. Its lease expires on the
// server, the waiter takes over with a greater token, and the dead owner —
// if it were still running — considered itself lost before that moment.
func TestScenarioOwnerDiesWithoutRelease(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, time.Minute)
	cliA, p := proxied(t, shared)
	cliB := etcdtest.Client(t, shared.Endpoints()...)
	a, b := session(t, cliA, "a"), session(t, cliB, "b")
	la := acquire(t, ctx, a, "job")

	type result struct {
		l  *lock.Lock
		at time.Time
	}
	got := make(chan result, 1)
	go func() {
		l, err := b.Acquire(ctx, "job")
		if err != nil {
			t.Error(err)
		}
		got <- result{l, time.Now()}
	}()
	// a's process "dies": nothing it sends or receives gets through.
	p.BlackholeTx()
	p.BlackholeRx()
	lost := lostAt(t, la, 10*time.Second)
	if !errors.Is(la.Err(), lock.ErrDeadlinePassed) {
		t.Errorf("a lost with %v, want ErrDeadlinePassed", la.Err())
	}
	r := <-got
	if r.l == nil {
		t.FailNow()
	}
	if r.l.Token() <= la.Token() {
		t.Errorf("b's token %v not above a's %v", r.l.Token(), la.Token())
	}
	if !lost.Before(r.at) {
		t.Errorf("a believed it held the lock until %v, after b acquired it at %v", lost, r.at)
	}
	t.Logf("a lost locally %v before b acquired", r.at.Sub(lost))
	if key, _ := holder(t, ctx, cliB, "job"); key != r.l.Key() {
		t.Errorf("holder %s, want b's key %s", key, r.l.Key())
	}
}

// Scenario: renew after expiry fails, for scripts (Detached) and sessions.
func TestScenarioRenewAfterExpiryFails(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, time.Minute)
	cli := etcdtest.Client(t, shared.Endpoints()...)
	d := newDetached(t, cli)
	g, err := d.Acquire(ctx, "job", "script-1", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	etcdtest.Eventually(t, 10*time.Second, func() bool { key, _ := holder(t, ctx, cli, "job"); return key == "" }, "lease never expired")
	if _, err := d.Renew(ctx, "job", "script-1", g.Token); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("renew after expiry = %v, want ErrNotHeld", err)
	}
	if key, _ := holder(t, ctx, cli, "job"); key != "" {
		t.Fatalf("renew after expiry revived %s", key)
	}
	g2, err := d.Acquire(ctx, "job", "script-2", 5*time.Second)
	if err != nil || g2.Token <= g.Token {
		t.Fatalf("next owner: %+v %v", g2, err)
	}
	if _, err := d.Renew(ctx, "job", "script-1", g.Token); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("old owner's renew with new holder present = %v, want ErrNotHeld", err)
	}
	if _, err := d.Renew(ctx, "job", "script-2", g2.Token); err != nil {
		t.Errorf("current owner's renew: %v", err)
	}
}

// Scenario: a stale write after a new token was issued is rejected by the
// fenced resources (an in-process guard and an etcd-guarded key), and the
// resource keeps the new owner's data.
func TestScenarioStaleWriteAfterNewToken(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, time.Minute)
	cliA, p := proxied(t, shared)
	cli := etcdtest.Client(t, shared.Endpoints()...)
	a, b := session(t, cliA, "a"), session(t, cli, "b")
	var guard fencing.Guard
	var data string
	write := func(v string) func() error { return func() error { data = v; return nil } }
	dataKey := prefixOf(t) + "data"

	la := acquire(t, ctx, a, "res")
	if err := guard.Do("res", la.Token(), write("a1")); err != nil {
		t.Fatal(err)
	}
	if _, err := etcdfence.Commit(ctx, cli, la.Key(), la.Token(), clientv3.OpPut(dataKey, "a1")); err != nil {
		t.Fatal(err)
	}
	// a is partitioned, loses the lock; b takes over and writes.
	p.BlackholeTx()
	p.BlackholeRx()
	lostAt(t, la, 10*time.Second)
	lb := acquire(t, ctx, b, "res")
	if err := guard.Do("res", lb.Token(), write("b1")); err != nil {
		t.Fatal(err)
	}
	if _, err := etcdfence.Commit(ctx, cli, lb.Key(), lb.Token(), clientv3.OpPut(dataKey, "b1")); err != nil {
		t.Fatal(err)
	}
	// a's delayed write arrives with its old token.
	err := guard.Do("res", la.Token(), write("a2-stale"))
	var stale *fencing.StaleTokenError
	if !errors.As(err, &stale) || stale.Current != lb.Token() {
		t.Errorf("guard accepted or misreported a stale write: %v", err)
	}
	_, err = etcdfence.Commit(ctx, cli, la.Key(), la.Token(), clientv3.OpPut(dataKey, "a2-stale"))
	if !errors.As(err, &stale) || stale.Current != lb.Token() {
		t.Errorf("etcd guard accepted or misreported a stale write: %v", err)
	}
	if data != "b1" {
		t.Errorf("in-process resource = %q, want b1", data)
	}
	if resp, err := cli.Get(ctx, dataKey); err != nil || string(resp.Kvs[0].Value) != "b1" {
		t.Errorf("etcd resource = %v %v, want b1", resp, err)
	}
}

// Scenario: the stale owner releases the new owner's lock. Nothing changes:
// the release compares the stale owner's token, which no key has any more.
func TestScenarioStaleOwnerReleasesNewOwnersLock(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, time.Minute)
	cliA, p := proxied(t, shared)
	cli := etcdtest.Client(t, shared.Endpoints()...)
	a, b := session(t, cliA, "a"), session(t, cli, "b")
	la := acquire(t, ctx, a, "job")
	p.BlackholeTx()
	p.BlackholeRx()
	lostAt(t, la, 10*time.Second)
	lb := acquire(t, ctx, b, "job")
	p.UnblackholeTx()
	p.UnblackholeRx()
	reconnected(t, ctx, cliA)

	// Its session was lost to its deadline: Release says so at once, and
	// deletes nothing.
	if err := la.Release(ctx); !errors.Is(err, lock.ErrSessionLost) || !errors.Is(err, lock.ErrDeadlinePassed) {
		t.Errorf("stale release = %v, want the session's loss to its deadline", err)
	}
	if key, tok := holder(t, ctx, cli, "job"); key != lb.Key() || fencing.Token(tok) != lb.Token() {
		t.Fatalf("after stale release holder is %s/%d, want b's %s/%v", key, tok, lb.Key(), lb.Token())
	}
	if lb.Err() != nil {
		t.Errorf("b's lock is %v after a's release", lb.Err())
	}

	// The same through the script API.
	d := newDetached(t, cli)
	if err := d.Release(ctx, "job", "a", la.Token()); err != nil {
		t.Errorf("detached stale release = %v", err)
	}
	if key, _ := holder(t, ctx, cli, "job"); key != lb.Key() {
		t.Errorf("detached stale release freed b's lock")
	}
	if err := d.Release(ctx, "job", "a", lb.Token()); !errors.Is(err, lock.ErrNotOwner) {
		t.Errorf("release of b's token by a = %v, want ErrNotOwner", err)
	}
	if key, _ := holder(t, ctx, cli, "job"); key != lb.Key() {
		t.Errorf("release by the wrong owner freed b's lock")
	}

	// The new owner may be the same session: a re-acquired name gets the
	// same key (one key per lease and name) with a new token. A late retry
	// of the old handle's Release must not free it.
	if err := lb.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lb2 := acquire(t, ctx, b, "job")
	if lb2.Key() != lb.Key() || lb2.Token() <= lb.Token() {
		t.Fatalf("re-acquired %s/%v after %s/%v", lb2.Key(), lb2.Token(), lb.Key(), lb.Token())
	}
	if err := lb.Release(ctx); err != nil {
		t.Errorf("late retry of the old release = %v", err)
	}
	if key, tok := holder(t, ctx, cli, "job"); key != lb2.Key() || fencing.Token(tok) != lb2.Token() {
		t.Errorf("late release of the old handle freed the new lock: holder %s/%d", key, tok)
	}
	if lb2.Err() != nil {
		t.Errorf("new lock is %v", lb2.Err())
	}
}
