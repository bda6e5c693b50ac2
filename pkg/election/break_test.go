package election_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/pkg/election"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/holders"
)

// An operator's holders.Break of the leader is one leadership loss: the
// leader's term ends once, and the next term is the waiting candidate's —
// the broken leader starts no term in between, whether it released when
// asked, was fenced, or was forced.
func TestBreakOfLeaderIsOneLoss(t *testing.T) {
	t.Parallel()
	for name, force := range map[string]bool{"asked": false, "forced": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var terms []string // identities, in the order their terms started
			startedA, startedB := make(chan election.Term, 4), make(chan election.Term, 4)
			m := &recorder{}
			callbacks := func(id string, started chan election.Term) election.Callbacks {
				return election.Callbacks{OnStartedLeading: func(ctx context.Context, term election.Term) {
					mu.Lock()
					terms = append(terms, id)
					mu.Unlock()
					offer(started, term)
					<-ctx.Done()
				}}
			}
			a := start(t, cand{Identity: "a", TTL: 5 * time.Second, Config: election.Config{Metrics: m, Callbacks: callbacks("a", startedA)}})
			term := receive(t, startedA, 30*time.Second, "a's term")
			start(t, cand{Identity: "b", TTL: 5 * time.Second, Config: election.Config{Callbacks: callbacks("b", startedB)}})
			waitQueued(t, a.cli, prefix(t), 1)

			var err error
			if force {
				_, err = holders.Force(context.Background(), a.cli, prefix(t), "ctl", term.Token)
			} else {
				_, _, err = holders.Break(context.Background(), a.cli, prefix(t), "ctl", term.Token, 10*time.Second)
			}
			if err != nil {
				t.Fatal(err)
			}
			receive(t, startedB, 30*time.Second, "b's term")
			etcdtest.Eventually(t, 10*time.Second, func() bool { m.mu.Lock(); defer m.mu.Unlock(); return len(m.stopped) >= 1 }, "a's term never stopped")
			mu.Lock()
			defer mu.Unlock()
			m.mu.Lock()
			defer m.mu.Unlock()
			if len(terms) != 2 || terms[0] != "a" || terms[1] != "b" {
				t.Errorf("terms started: %v, want [a b]", terms)
			}
			if m.started.Load() != 1 || len(m.stopped) != 1 {
				t.Errorf("a's Metrics: %d terms started, %d stopped (%v); want 1 and 1", m.started.Load(), len(m.stopped), m.stopped)
			}
		})
	}
}

// A forced break of a leader that no one else waits behind: its term ends
// once, and its next term is on a new session, not one on the broken
// lease that the break's revoke would end — a second loss for one break.
func TestForcedBreakOfLoneLeaderIsOneLoss(t *testing.T) {
	t.Parallel()
	m := &recorder{}
	started := make(chan election.Term, 4)
	// A 10 s TTL: the term outlives the operator's delayed requests on a
	// loaded machine, so that the break finds it.
	a := start(t, cand{Identity: "a", TTL: 10 * time.Second, Config: election.Config{Metrics: m, Callbacks: election.Callbacks{
		OnStartedLeading: func(ctx context.Context, term election.Term) { offer(started, term); <-ctx.Done() },
	}}})
	term := receive(t, started, 30*time.Second, "a's term")
	st, err := holders.Inspect(context.Background(), a.cli, prefix(t), "ctl")
	if err != nil || st.Holder == nil {
		t.Fatalf("Inspect: %+v %v", st, err)
	}
	broken := st.Holder.LeaseID
	// The operator's requests each take 2 s to arrive, so that the
	// elector has time to campaign between the break's delete and its
	// revoke, as a loaded machine gives it.
	p, url := etcdtest.Proxy(t, cluster.Endpoints()[0])
	p.DelayTx(2*time.Second, 0)
	operator := etcdtest.Client(t, url)
	if _, err := holders.Force(context.Background(), operator, prefix(t), "ctl", term.Token); err != nil {
		t.Fatal(err)
	}
	// The break is over once a leads on a lease other than the broken one.
	etcdtest.Eventually(t, 30*time.Second, func() bool {
		cur := a.e.Term()
		if cur == nil || cur.Token == term.Token {
			return false
		}
		st, err := holders.Inspect(context.Background(), a.cli, prefix(t), "ctl")
		return err == nil && st.Holder != nil && st.Holder.Token == cur.Token && st.Holder.LeaseID != broken
	}, "a never led again on a new lease")
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started.Load() != 2 || len(m.stopped) != 1 {
		t.Errorf("Metrics: %d terms started, %d stopped (%v); want 2 and 1: one break, one loss", m.started.Load(), len(m.stopped), m.stopped)
	}
}
