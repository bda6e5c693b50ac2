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
	"github.com/etcdlock/etcdlock/pkg/lock"
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
			start(t, election.Config{Identity: "a", Client: etcdtest.Client(t, url), Metrics: m, Callbacks: election.Callbacks{
				OnStartedLeading: func(ctx context.Context, term election.Term) { terms <- term; <-ctx.Done() },
			}})
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
				st, err := lock.Inspect(ctx, cli, "ctl", lock.WithPrefix(prefix(t)))
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
			if got := lock.LossReason(lost); !errors.Is(lost, lock.ErrLost) || got != want {
				t.Errorf("after a %s the term stopped with %v (reason %q), want reason %q", end, lost, got, want)
			}
		})
	}
}

// A leader that cannot confirm its key ends its term at the key's
// deadline — the last confirmation's send time + TTL − margin — even
// while its lease is renewed: the next leader, which waits one TTL after
// an unclean end (a deleted key no watch reported, say), cannot start
// before. The session's clock is a fake one, stepped by the test.
func TestUnconfirmedKeyEndsTermWhileLeaseLives(t *testing.T) {
	t.Parallel()
	fc := clocktest.NewFake(time.Unix(3_000_000, 0))
	injected := errors.New("injected: no confirmation")
	var failing atomic.Bool
	m := &recorder{onStop: make(chan error, 4)}
	terms := make(chan election.Term, 4)
	ended := make(chan struct{}, 4)
	cfg := election.Config{Identity: "a", TTL: 3 * time.Second, Metrics: m,
		SessionOptions: []lock.SessionOption{lock.WithClock(fc)},
		Callbacks: election.Callbacks{OnStartedLeading: func(ctx context.Context, term election.Term) {
			terms <- term
			<-ctx.Done()
			ended <- struct{}{}
		}}}
	c := start(t, election.WithConfirm(cfg, func(ctx context.Context, l *lock.Lock) error {
		if failing.Load() {
			return injected
		}
		return l.Confirm(ctx)
	}))
	term := receive(t, terms, 10*time.Second, "term")
	// TTL 3 s: confirmations and renewals every 1 s, margin 300 ms: the
	// key's deadline is 2.7 s after the first confirmation, sent before
	// the term started.
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
				t.Fatalf("the term ended %ds after its last confirmation, before the key's deadline", i)
			default:
			}
		}
	}
	receive(t, ended, 10*time.Second, "end of the term at the key's deadline")
	lost := receive(t, m.onStop, 10*time.Second, "StoppedLeading")
	if !errors.Is(lost, lock.ErrLost) || !errors.Is(lost, lock.ErrDeadlinePassed) || !errors.Is(lost, injected) {
		t.Errorf("term stopped with %v, want the key's deadline passed after %v", lost, injected)
	}
	if lock.LossReason(lost) != "deadline" {
		t.Errorf("reason %q, want deadline", lock.LossReason(lost))
	}
	// The lease lived on: the elector resigned the term (a clean end, its
	// context over) and campaigns again on the same session.
	l, err := election.GetLeader(context.Background(), c.cli, "ctl", lock.WithPrefix(prefix(t)))
	if err != nil || l.Token == term.Token {
		t.Errorf("leader after the term %+v (%v): the term's key is still there", l, err)
	}
}

// After the only etcd member restarts from an outage longer than the TTL
// and than the clean-up timeout of the old leader's revoke (README:
// Failover), the old term's key outlives the restart — etcd extends every
// lease when it becomes leader — and the next term starts only after etcd
// expired it and the handover delay (one TTL) passed.
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
	cfg := func(id string) election.Config {
		return election.Config{Identity: id, Client: etcdtest.Client(t, eps...), Callbacks: election.Callbacks{
			OnStartedLeading: func(ctx context.Context, term election.Term) {
				terms <- started{id, term, time.Now()}
				<-ctx.Done()
				ended <- id
			}}}
	}
	start(t, cfg("a"))
	old := receive(t, terms, 10*time.Second, "first term")
	start(t, cfg("b"))
	waitQueued(t, etcdtest.Client(t, eps...), prefix(t), 1)
	member.Stop()
	if who := receive(t, ended, 30*time.Second, "end of the first term"); who != old.who {
		t.Fatalf("%s's term ended, want %s's", who, old.who)
	}
	// The outage is the fault: past the clean-up timeout, the old
	// sessions' revokes have failed.
	time.Sleep(lock.DefaultCleanupTimeout + time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := member.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	cli := etcdtest.Client(t, eps...)
	w := cli.Watch(ctx, old.term.Key, clientv3.WithRev(int64(old.term.Token)+1))
	var deleted time.Time
	for deleted.IsZero() {
		resp, ok := <-w
		if !ok || resp.Err() != nil {
			t.Fatalf("watch of the old term's key ended: %v", resp.Err())
		}
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypeDelete {
				deleted = time.Now()
			}
		}
	}
	next := receive(t, terms, time.Minute, "the next term")
	t.Logf("restart → old key deleted %v → next term (%s) %v later; %v after the restart in all",
		deleted.Sub(restarted), next.who, next.at.Sub(deleted), next.at.Sub(restarted))
	// The observer's watch may see the delete late: half a second of room.
	if wait := next.at.Sub(deleted); wait < 1500*time.Millisecond {
		t.Errorf("the next term started %v after the old term's key was deleted, want at least the handover delay (TTL 2s, less 500ms for the watch)", wait)
	}
}
