package election_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/pkg/clock/clocktest"
	"github.com/etcdlock/etcdlock/pkg/election"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/holders"
	"github.com/etcdlock/etcdlock/pkg/lock"
	"github.com/etcdlock/etcdlock/pkg/lock/lockmetrics"
)

// A term's loss reaches Metrics with its reason: a deleted key, a revoked
// lease, a deadline missed while cut off from etcd.
func TestLossReasons(t *testing.T) {
	t.Parallel()
	for _, end := range []string{"delete", "revoke", "cut off"} {
		t.Run(end, func(t *testing.T) {
			t.Parallel()
			p, url := etcdtest.Proxy(t, cluster.Endpoints()[0])
			defer func() { p.UnblackholeTx(); p.UnblackholeRx() }()
			m := &recorder{onStop: make(chan error, 4)}
			terms := make(chan election.Term, 4)
			start(t, cand{Identity: "a", Config: election.Config{Client: etcdtest.Client(t, url), Metrics: m, Callbacks: election.Callbacks{
				OnStartedLeading: func(ctx context.Context, term election.Term) { terms <- term; <-ctx.Done() },
			}}})
			term := receive(t, terms, 10*time.Second, "term")
			ctx := context.Background()
			cli := etcdtest.Client(t, cluster.Endpoints()...)
			want := map[string]string{"delete": "key_deleted", "revoke": "lease_revoked", "cut off": "deadline"}[end]
			switch end {
			case "delete":
				if _, err := cli.Delete(ctx, term.Key); err != nil {
					t.Fatal(err)
				}
			case "revoke":
				st, err := holders.Inspect(ctx, cli, prefix(t), "ctl")
				if err != nil || st.Holder == nil || st.Holder.Token != term.Token {
					t.Fatalf("holder %+v (%v), want the term %v", st.Holder, err, term.Token)
				}
				if _, err := cli.Revoke(ctx, st.Holder.LeaseID); err != nil {
					t.Fatal(err)
				}
			case "cut off":
				p.BlackholeTx()
				p.BlackholeRx()
			}
			lost := receive(t, m.onStop, 15*time.Second, "end of the term")
			if got := lockmetrics.LossReason(lost); !errors.Is(lost, lock.ErrLost) || got != want {
				t.Errorf("after a %s the term stopped with %v (reason %q), want reason %q", end, lost, got, want)
			}
		})
	}
}

// A leader that cannot prove its keys ends its term at the term's own
// deadline — the last proof's send time + TTL − margin — even while its
// lease is renewed: its tenure key, which only a proof renews, outlives
// the term, and the next leader, which waits until the tenure key is gone
// after an unclean end (a deleted key no watch reported, say), cannot
// start before. The session's clock is a fake one, stepped by the test.
func TestUnconfirmedKeyEndsTermWhileLeaseLives(t *testing.T) {
	t.Parallel()
	fc := clocktest.NewFake(time.Unix(3_000_000, 0))
	injected := errors.New("injected: no proof")
	var failing atomic.Bool
	m := &recorder{onStop: make(chan error, 4)}
	terms := make(chan election.Term, 4)
	ended := make(chan struct{}, 4)
	cfg := cand{Identity: "a", TTL: 3 * time.Second,
		Opts: []lock.SessionOption{lock.WithClock(fc)}, Config: election.Config{Metrics: m,
			Callbacks: election.Callbacks{OnStartedLeading: func(ctx context.Context, term election.Term) {
				terms <- term
				<-ctx.Done()
				ended <- struct{}{}
			}}}}
	cfg.Config = election.WithProofFault(cfg.Config, func() error {
		if failing.Load() {
			return injected
		}
		return nil
	})
	c := start(t, cfg)
	term := receive(t, terms, 10*time.Second, "term")
	// TTL 3 s: proofs and renewals every 1 s, margin 300 ms: the term's
	// deadline is 2.7 s after its first proof, the tenure lease's grant,
	// sent before the term started.
	if d := term.Deadline(); d.After(fc.Now().Add(2700 * time.Millisecond)) {
		t.Fatalf("term deadline %v after its start, want at most 2.7s", d.Sub(fc.Now()))
	}
	failing.Store(true)
	for i := int64(1); i <= 3; i++ {
		fc.Step(time.Second)
		etcdtest.Eventually(t, 10*time.Second, func() bool { return m.renewals.Load() >= i }, "the lease was not renewed")
		if i < 3 {
			select {
			case <-ended:
				t.Fatalf("the term ended %ds after its last proof, before its deadline", i)
			default:
			}
		}
	}
	receive(t, ended, 10*time.Second, "end of the term at its deadline")
	lost := receive(t, m.onStop, 10*time.Second, "StoppedLeading")
	if !errors.Is(lost, lock.ErrLost) || !errors.Is(lost, lock.ErrDeadlinePassed) || !errors.Is(lost, injected) {
		t.Errorf("term stopped with %v, want the term's deadline passed after %v", lost, injected)
	}
	if lockmetrics.LossReason(lost) != "deadline" {
		t.Errorf("reason %q, want deadline", lockmetrics.LossReason(lost))
	}
	// The lease lived on: the elector resigned the term (a clean end, its
	// context over) and campaigns again on the same session.
	l, err := election.GetLeader(context.Background(), c.cli, prefix(t), "ctl")
	if err != nil || l.Token == term.Token {
		t.Errorf("leader after the term %+v (%v): the term's key is still there", l, err)
	}
}

// An operator deletes the key of a leader cut off from etcd: the old
// leader cannot hear of it, nor delete its tenure key, so the next leader
// waits until the tenure key expires with its lease, which the old leader
// stopped renewing when it was cut off — after the old leader's context
// ended (its deadline), and within about one TTL of the delete, never
// forever.
func TestNextTermWaitsForAnUnreachableLeadersTenureKey(t *testing.T) {
	t.Parallel()
	p, url := etcdtest.Proxy(t, cluster.Endpoints()[0])
	defer func() { p.UnblackholeTx(); p.UnblackholeRx() }()
	type event struct {
		who string
		at  time.Time
	}
	started, ended := make(chan event, 4), make(chan event, 4)
	cbs := func(id string) election.Callbacks {
		return election.Callbacks{OnStartedLeading: func(ctx context.Context, _ election.Term) {
			started <- event{id, time.Now()}
			<-ctx.Done()
			ended <- event{id, time.Now()}
		}}
	}
	a := start(t, cand{Identity: "a", Config: election.Config{Client: etcdtest.Client(t, url), Callbacks: cbs("a")}})
	receive(t, started, 10*time.Second, "a's term")
	term := a.e.Term()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	start(t, cand{Identity: "b", Config: election.Config{Client: cli, Callbacks: cbs("b")}})
	waitQueued(t, cli, prefix(t), 1)
	ctx := context.Background()
	tenures := prefix(t) + "ctl%tenure/"
	get, err := cli.Get(ctx, tenures, clientv3.WithPrefix())
	if err != nil || len(get.Kvs) != 1 {
		t.Fatalf("tenure keys %v (%v), want a's", get.Kvs, err)
	}
	w := cli.Watch(ctx, string(get.Kvs[0].Key), clientv3.WithRev(get.Header.Revision+1))
	p.BlackholeTx()
	p.BlackholeRx()
	deleted := time.Now()
	if _, err := cli.Delete(ctx, term.Key); err != nil {
		t.Fatal(err)
	}
	aEnd := receive(t, ended, 10*time.Second, "end of a's term")
	var gone time.Time
	for gone.IsZero() {
		resp := receive(t, w, 10*time.Second, "deletion of a's tenure key")
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypeDelete {
				gone = time.Now()
			}
		}
	}
	bStart := receive(t, started, 10*time.Second, "b's term")
	t.Logf("delete → a's context ended %v, a's tenure key gone %v, b started %v after the delete",
		aEnd.at.Sub(deleted), gone.Sub(deleted), bStart.at.Sub(deleted))
	if bStart.who != "b" || aEnd.who != "a" {
		t.Fatalf("%s started, %s ended; want b and a", bStart.who, aEnd.who)
	}
	if !bStart.at.After(aEnd.at) {
		t.Errorf("b started %v before a's context ended", aEnd.at.Sub(bStart.at))
	}
	// The test's watch may see the deletion a little after b does.
	if early := gone.Sub(bStart.at); early > 250*time.Millisecond {
		t.Errorf("b started %v before a's tenure key was gone", early)
	}
	// TTL 2 s; etcd expires leases up to 500 ms late.
	if took := bStart.at.Sub(deleted); took > 3*time.Second {
		t.Errorf("b started %v after the delete, want about one TTL (2s) at most", took)
	}
}

// A term whose tenure key is deleted, or whose tenure lease is revoked,
// while its leader key lives ends at once, lost with lock.ErrKeyDeleted:
// the key can no longer keep the next leader waiting. The elector releases
// the leader key — the term's context is over — and leads again.
func TestTenureKeyGoneEndsTerm(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"delete", "revoke"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			m := &recorder{onStop: make(chan error, 4)}
			terms := make(chan election.Term, 4)
			c := start(t, cand{Identity: "a", Config: election.Config{Metrics: m, Callbacks: election.Callbacks{
				OnStartedLeading: func(ctx context.Context, term election.Term) { terms <- term; <-ctx.Done() },
			}}})
			first := receive(t, terms, 10*time.Second, "term")
			ctx := context.Background()
			get, err := c.cli.Get(ctx, prefix(t)+"ctl%tenure/", clientv3.WithPrefix())
			if err != nil || len(get.Kvs) != 1 {
				t.Fatalf("tenure keys %v (%v), want the term's", get.Kvs, err)
			}
			if how == "delete" {
				_, err = c.cli.Delete(ctx, string(get.Kvs[0].Key))
			} else {
				_, err = c.cli.Revoke(ctx, clientv3.LeaseID(get.Kvs[0].Lease))
			}
			if err != nil {
				t.Fatal(err)
			}
			lost := receive(t, m.onStop, 10*time.Second, "end of the term")
			if !errors.Is(lost, lock.ErrLost) || !errors.Is(lost, lock.ErrKeyDeleted) || lockmetrics.LossReason(lost) != "key_deleted" {
				t.Errorf("term stopped with %v (reason %q), want a loss to a deleted key", lost, lockmetrics.LossReason(lost))
			}
			if next := receive(t, terms, 10*time.Second, "next term"); next.Token <= first.Token {
				t.Errorf("next term's token %v, want above %v", next.Token, first.Token)
			}
		})
	}
}

// After the only etcd member restarts from an outage longer than the TTL
// and than the clean-up timeout of the old leader's clean-ups (README:
// Failover), the old term's leader key and tenure key outlive the restart
// — etcd extends every lease when it becomes leader — and the next term
// starts only once both are gone.
func TestNextTermAfterTheOnlyMemberRestarted(t *testing.T) {
	t.Parallel()
	c := etcdtest.Cluster(t) // one member, etcd's default raft timing
	member, eps := c.Member(0), c.Endpoints()
	type started struct {
		who  string
		term election.Term
		at   time.Time
	}
	terms := make(chan started, 8)
	ended := make(chan string, 8)
	cfg := func(id string) cand {
		return cand{Identity: id, Config: election.Config{Client: etcdtest.Client(t, eps...), Callbacks: election.Callbacks{
			OnStartedLeading: func(ctx context.Context, term election.Term) {
				terms <- started{id, term, time.Now()}
				<-ctx.Done()
				ended <- id
			}}}}
	}
	start(t, cfg("a"))
	old := receive(t, terms, 10*time.Second, "first term")
	start(t, cfg("b"))
	cli := etcdtest.Client(t, eps...)
	waitQueued(t, cli, prefix(t), 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	get, err := cli.Get(ctx, prefix(t)+"ctl%tenure/", clientv3.WithPrefix())
	if err != nil || len(get.Kvs) != 1 {
		t.Fatalf("tenure keys %v (%v), want the first term's", get.Kvs, err)
	}
	tenure := string(get.Kvs[0].Key)
	member.Stop()
	if who := receive(t, ended, 30*time.Second, "end of the first term"); who != old.who {
		t.Fatalf("%s's term ended, want %s's", who, old.who)
	}
	// The outage is the fault: past the clean-up timeout, the old
	// session's revoke and the tenure key's delete have failed.
	time.Sleep(election.CleanupTimeout + time.Second)
	if err := member.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	w := cli.Watch(ctx, prefix(t), clientv3.WithPrefix(), clientv3.WithRev(int64(old.term.Token)+1))
	gone := map[string]time.Time{}
	for len(gone) < 2 {
		resp, ok := <-w
		if !ok || resp.Err() != nil {
			t.Fatalf("watch of the old term's keys ended: %v", resp.Err())
		}
		for _, ev := range resp.Events {
			if k := string(ev.Kv.Key); ev.Type == clientv3.EventTypeDelete && (k == old.term.Key || k == tenure) {
				gone[k] = time.Now()
			}
		}
	}
	next := receive(t, terms, time.Minute, "the next term")
	t.Logf("restart → old leader key deleted %v, old tenure key %v → next term (%s) %v after the restart",
		gone[old.term.Key].Sub(restarted), gone[tenure].Sub(restarted), next.who, next.at.Sub(restarted))
	// The test's watch may see a deletion a little after the candidate.
	for k, at := range gone {
		if early := at.Sub(next.at); early > 250*time.Millisecond {
			t.Errorf("the next term started %v before the old term's key %s was gone", early, k)
		}
	}
}
