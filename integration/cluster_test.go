package integration

import (
	"errors"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/embedded"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// Scenario: the lock service restarts. A holder whose deadline outlasts the
// outage keeps its lock (etcd extends leases across a restart); a lease
// nobody renews still expires afterwards; tokens keep increasing.
func TestScenarioLockServiceRestart(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 2*time.Minute)
	c := etcdtest.Cluster(t)
	cli := etcdtest.Client(t, c.Endpoints()...)
	a := session(t, cli, "a", lock.WithTTL(15*time.Second))
	la := acquire(t, ctx, a, "job")
	d := newDetached(t, cli)
	orphan, err := d.Acquire(ctx, "orphan", "dead-script", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}

	// A crash and restart (a graceful stop waits up to etcd's request
	// timeout for open streams, longer than this scenario's TTL).
	m := c.Member(0)
	down := time.Now()
	before := a.Deadline()
	m.HardStop()
	if err := m.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("etcd was down for %v", time.Since(down))
	reconnected(t, ctx, cli)
	// Survived: a renews again, before its deadline, and its key is the
	// one it acquired. On a machine so slow that the renewal was seen only
	// past the deadline, a may have given the lock up instead: a loss.
	var inTime bool
	etcdtest.Eventually(t, 30*time.Second, func() bool {
		renewed := a.Deadline().After(before)
		now := time.Now() // after the read: a renewal seen now came before
		inTime = renewed && now.Before(before)
		return renewed || now.After(before)
	}, "a neither renewed nor reached its deadline")
	if !inTime && la.Err() != nil {
		t.Logf("a renewed only past its deadline (%v after the stop): lost with %v", before.Sub(down), la.Err())
		if !errors.Is(la.Err(), lock.ErrLost) {
			t.Fatalf("a's lock ended with %v, want a loss", la.Err())
		}
	} else {
		if la.Err() != nil {
			t.Fatalf("a's lock ended although a renewed before its deadline: %v", la.Err())
		}
		if key, tok := holder(t, ctx, cli, "job"); key != la.Key() || fencing.Token(tok) != la.Token() {
			t.Fatalf("holder after restart %s/%d, want a's %s/%v", key, tok, la.Key(), la.Token())
		}
	}
	// Expired: the orphan's lease was not renewed, so etcd frees the name.
	etcdtest.Eventually(t, 20*time.Second, func() bool { key, _ := holder(t, ctx, cli, "orphan"); return key == "" }, "orphan lease never expired after restart")
	next, err := d.Acquire(ctx, "orphan", "next-script", 5*time.Second)
	if err != nil || next.Token <= orphan.Token {
		t.Fatalf("acquire after orphan expired: %+v %v (old token %v)", next, err, orphan.Token)
	}

	// Tokens increase across the restart. A session lost to its deadline
	// (seen only on a machine too slow to renew in time) says so.
	if err := la.Release(ctx); err != nil && (inTime || !errors.Is(err, lock.ErrLost)) {
		t.Fatal(err)
	}
	b := session(t, cli, "b")
	lb := acquire(t, ctx, b, "job")
	if lb.Token() <= la.Token() || lb.Token() <= next.Token {
		t.Errorf("token after restart %v not above earlier %v / %v", lb.Token(), la.Token(), next.Token)
	}
}

// Scenario: the token counter survives the failure of the etcd leader.
// Owners acquire and release through a leader crash, a new election and the
// crashed member's return; tokens strictly increase throughout.
func TestScenarioTokenCounterAfterLeaderFailure(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 3*time.Minute)
	c := etcdtest.Cluster(t, embedded.WithMembers(3), embedded.WithRaftTiming(50*time.Millisecond, 500*time.Millisecond))
	cli := etcdtest.Client(t, c.Endpoints()...)
	var tokens []fencing.Token
	cycle := func(owner string, n int) {
		t.Helper()
		s := session(t, cli, owner, lock.WithTTL(5*time.Second))
		for range n {
			var l *lock.Lock
			retry(t, func() (err error) { l, err = s.Acquire(ctx, "job"); return err })
			tokens = append(tokens, l.Token())
			retry(t, func() error { return l.Release(ctx) })
		}
	}
	cycle("before", 5)
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A holder across the crash: it keeps the lock or loses it cleanly.
	h := session(t, cli, "holder", lock.WithTTL(5*time.Second))
	lh := acquire(t, ctx, h, "held")
	leader.HardStop()
	newLeader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if newLeader == leader {
		t.Fatal("no new leader")
	}
	cycle("during", 5)
	if err := leader.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	cycle("after", 5)

	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("token %d = %v not above %v: %v", i, tokens[i], tokens[i-1], tokens)
		}
	}
	switch err := lh.Err(); {
	case err == nil:
		if key, tok := holder(t, ctx, cli, "held"); key != lh.Key() || fencing.Token(tok) != lh.Token() {
			t.Errorf("holder believes it is active but etcd's holder is %s/%d", key, tok)
		}
	case !errors.Is(err, lock.ErrLost):
		t.Errorf("holder ended with %v, want a loss", err)
	}
	t.Logf("tokens through leader failure: %v; holder across the crash: %v", tokens, lh.Err())
}
