package election_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
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
			// A 5 s TTL: a loaded machine hears of a revoke before the
			// session's deadline, as the reason asserted needs.
			start(t, cand{Identity: "a", TTL: 5 * time.Second, Config: election.Config{Client: etcdtest.Client(t, url), Metrics: m, Callbacks: election.Callbacks{
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
// ended (its deadline), never forever. The next leader's callback checks
// the order as it starts: the old term's context has ended and its tenure
// key is gone.
func TestNextTermWaitsForAnUnreachableLeadersTenureKey(t *testing.T) {
	t.Parallel()
	p, url := etcdtest.Proxy(t, cluster.Endpoints()[0])
	defer func() { p.UnblackholeTx(); p.UnblackholeRx() }()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	type event struct {
		who string
		at  time.Time
		// As b's term started: whether a's term's context had ended,
		// and a's tenure key, if it was still there.
		aEnded  bool
		aTenure []*mvccpb.KeyValue
		err     error
	}
	started, ended := make(chan event, 4), make(chan event, 4)
	aTerm := make(chan context.Context, 1)
	var aTenure string // set before b starts
	a := start(t, cand{Identity: "a", Config: election.Config{Client: etcdtest.Client(t, url), Callbacks: election.Callbacks{
		OnStartedLeading: func(ctx context.Context, _ election.Term) {
			select {
			case aTerm <- ctx: // its first term's, the one b waits for
			default:
			}
			started <- event{who: "a", at: time.Now()}
			<-ctx.Done()
			ended <- event{who: "a", at: time.Now()}
		}}}})
	receive(t, started, 10*time.Second, "a's term")
	term := a.e.Term()
	ctx := context.Background()
	get, err := cli.Get(ctx, prefix(t)+"ctl%tenure/", clientv3.WithPrefix())
	if err != nil || len(get.Kvs) != 1 {
		t.Fatalf("tenure keys %v (%v), want a's", get.Kvs, err)
	}
	// <name>%tenure/<lease-hex>-<token-hex>, holding the term's identity.
	var v struct{ Identity string }
	if kv := get.Kvs[0]; !strings.HasSuffix(string(kv.Key), fmt.Sprintf("-%x", int64(term.Token))) || json.Unmarshal(kv.Value, &v) != nil || v.Identity != "a" {
		t.Fatalf("tenure key %s = %q, want a's (token %d)", kv.Key, kv.Value, term.Token)
	}
	aTenure = string(get.Kvs[0].Key)
	start(t, cand{Identity: "b", Config: election.Config{Client: cli, Callbacks: election.Callbacks{
		OnStartedLeading: func(ctx context.Context, _ election.Term) {
			ev := event{who: "b", at: time.Now()}
			ev.aEnded = (<-aTerm).Err() != nil
			// Read after b started: a key still there was there as b started.
			get, err := cli.Get(ctx, aTenure)
			if err == nil {
				ev.aTenure = get.Kvs
			}
			ev.err = err
			started <- ev
			<-ctx.Done()
		}}}})
	waitQueued(t, cli, prefix(t), 1)
	p.BlackholeTx()
	p.BlackholeRx()
	deleted := time.Now()
	if _, err := cli.Delete(ctx, term.Key); err != nil {
		t.Fatal(err)
	}
	aEnd := receive(t, ended, 10*time.Second, "end of a's term")
	bStart := receive(t, started, 10*time.Second, "b's term")
	t.Logf("delete → a's context ended %v, b started %v after the delete", aEnd.at.Sub(deleted), bStart.at.Sub(deleted))
	if bStart.who != "b" || aEnd.who != "a" {
		t.Fatalf("%s started, %s ended; want b and a", bStart.who, aEnd.who)
	}
	if bStart.err != nil {
		t.Fatalf("reading a's tenure key as b started: %v", bStart.err)
	}
	if !bStart.aEnded {
		t.Errorf("b started before a's context ended")
	}
	if len(bStart.aTenure) != 0 {
		t.Errorf("b started while a's tenure key %s was there", aTenure)
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
			// A 5 s TTL: a loaded machine hears of the tenure key's end
			// before the session's deadline, as the reason asserted needs.
			c := start(t, cand{Identity: "a", TTL: 5 * time.Second, Config: election.Config{Metrics: m, Callbacks: election.Callbacks{
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
		// The election's keys, read as the term started: a key among
		// them was there when it started.
		keys []string
		err  error
	}
	terms := make(chan started, 8)
	ended := make(chan string, 8)
	cli := etcdtest.Client(t, eps...)
	// A TTL a loaded machine renews in time: the first term must last
	// until the member stops.
	cfg := func(id string) cand {
		return cand{Identity: id, TTL: 5 * time.Second, Config: election.Config{Client: etcdtest.Client(t, eps...), Callbacks: election.Callbacks{
			OnStartedLeading: func(ctx context.Context, term election.Term) {
				s := started{who: id, term: term, at: time.Now()}
				var get *clientv3.GetResponse
				if get, s.err = cli.Get(ctx, prefix(t), clientv3.WithPrefix(), clientv3.WithKeysOnly()); s.err == nil {
					for _, kv := range get.Kvs {
						s.keys = append(s.keys, string(kv.Key))
					}
				}
				terms <- s
				<-ctx.Done()
				ended <- id
			}}}}
	}
	start(t, cfg("a"))
	old := receive(t, terms, 10*time.Second, "first term")
	start(t, cfg("b"))
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
	next := receive(t, terms, time.Minute, "the next term")
	t.Logf("restart → next term (%s) %v after the restart", next.who, next.at.Sub(restarted))
	if next.at.Before(restarted) {
		t.Fatalf("a term started before the restart, while the first term should have led: %+v", next)
	}
	if next.err != nil {
		t.Fatalf("reading the election's keys as the next term started: %v", next.err)
	}
	for _, k := range []string{old.term.Key, tenure} {
		if slices.Contains(next.keys, k) {
			t.Errorf("the next term started while the old term's key %s was there (keys: %v)", k, next.keys)
		}
	}
}
