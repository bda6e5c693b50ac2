package election_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/pkg/election"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// Observe reports the leader, each change of leader, and a vacancy, and
// closes its channel when its context ends.
func TestObserveReportsLeadersAndVacancyUntilCanceled(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	leaders, err := election.Observe(ctx, cli, prefix(t), "ctl")
	if err != nil {
		t.Fatal(err)
	}
	next := func(what string) election.Leader {
		t.Helper()
		return receive(t, leaders, 10*time.Second, what)
	}
	if l := next("vacancy"); l != (election.Leader{}) {
		t.Errorf("before any candidate: leader %+v, want the zero Leader", l)
	}
	// TTLs a loaded machine renews in time: no term may be lost to its
	// deadline before the test reads it.
	a := start(t, cand{Identity: "a", TTL: 5 * time.Second, Config: election.Config{ReleaseOnCancel: true, Callbacks: election.Callbacks{
		OnStartedLeading: func(ctx context.Context, _ election.Term) { <-ctx.Done() },
	}}})
	if l := next("leader"); l.Identity != "a" || !l.Token.IsValid() {
		t.Errorf("leader %+v, want a with a token", l)
	}
	a.stop() // resigns
	if l := next("vacancy after the resign"); l != (election.Leader{}) {
		t.Errorf("after the resign: leader %+v, want the zero Leader", l)
	}
	cancel()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-leaders:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("channel not closed after its context ended")
		}
	}
}

// A nil client, an invalid prefix or an invalid name is an error from Observe
// itself, the same as GetLeader's, and no channel (a nil client used to
// panic on Observe's goroutine, killing the process).
func TestObserveRejectsBadInput(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	for name, tc := range map[string]struct {
		cli    *clientv3.Client
		prefix string
		name   string
		want   error
	}{
		"nil client":           {nil, "/p/", "x", lock.ErrInvalidOption},
		"empty name":           {cli, "/p/", "", lock.ErrInvalidName},
		"NUL in name":          {cli, "/p/", "a\x00b", lock.ErrInvalidName},
		"prefix without slash": {cli, "/el", "x", lock.ErrInvalidOption},
		"empty prefix":         {cli, "", "x", lock.ErrInvalidOption},
	} {
		t.Run(name, func(t *testing.T) {
			ch, err := election.Observe(context.Background(), tc.cli, tc.prefix, tc.name)
			if !errors.Is(err, tc.want) || ch != nil {
				t.Errorf("Observe = %v, %v; want a nil channel and %v", ch, err, tc.want)
			}
			if _, gerr := election.GetLeader(context.Background(), tc.cli, tc.prefix, tc.name); !errors.Is(gerr, tc.want) {
				t.Errorf("GetLeader = %v, want %v", gerr, tc.want)
			}
		})
	}
}

// A leader's Since is when its term began, not when it queued: b, queued
// behind a, begins once a resigns, and GetLeader says so — the Started of
// b's Term, after the resign.
func TestLeaderSinceIsWhenTheTermBegan(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	terms := make(chan election.Term, 4)
	// TTLs a loaded machine renews in time: no term may be lost to its
	// deadline before the test reads it.
	a := start(t, cand{Identity: "a", TTL: 5 * time.Second, Config: election.Config{ReleaseOnCancel: true, Callbacks: election.Callbacks{
		OnStartedLeading: func(ctx context.Context, term election.Term) { offer(terms, term); <-ctx.Done() },
	}}})
	first := receive(t, terms, 10*time.Second, "a's term")
	if l, err := election.GetLeader(t.Context(), cli, prefix(t), "ctl"); err != nil || l.Token != first.Token || !l.Since.Equal(first.Started) {
		t.Errorf("GetLeader = %+v (%v), want a's term %v, since %v", l, err, first.Token, first.Started)
	}
	start(t, cand{Identity: "b", TTL: 5 * time.Second, Config: election.Config{Callbacks: election.Callbacks{
		OnStartedLeading: func(ctx context.Context, term election.Term) { offer(terms, term); <-ctx.Done() },
	}}})
	waitQueued(t, cli, prefix(t), 1)
	octx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	leaders, err := election.Observe(octx, cli, prefix(t), "ctl")
	if err != nil {
		t.Fatal(err)
	}
	if l := receive(t, leaders, 10*time.Second, "the leader observed"); l.Token != first.Token || !l.Since.Equal(first.Started) {
		t.Errorf("Observe first sent %+v, want a's term %v, since %v", l, first.Token, first.Started)
	}
	resigned := time.Now()
	a.stop() // resigns
	second := receive(t, terms, 10*time.Second, "b's term")
	// b's key led before its term began: Observe may send b without
	// Since first, and must send it again with Since once the term began.
	// The channel closes when octx ends.
	withSince := false
	for l := range leaders {
		if l.Token == 0 || l.Token == first.Token {
			continue
		}
		if l.Token != second.Token || l.Identity != "b" {
			t.Fatalf("Observe sent %+v, want b's term %v", l, second.Token)
		}
		if l.Since.Equal(second.Started) {
			withSince = true
			break
		}
		if !l.Since.IsZero() {
			t.Fatalf("Observe sent b since %v, want zero or its term's start %v", l.Since, second.Started)
		}
	}
	if !withSince {
		t.Fatalf("Observe never sent b's term with its start %v", second.Started)
	}
	l, err := election.GetLeader(t.Context(), cli, prefix(t), "ctl")
	if err != nil || l.Identity != "b" || l.Token != second.Token {
		t.Fatalf("GetLeader = %+v (%v), want b's term %v", l, err, second.Token)
	}
	if !l.Since.Equal(second.Started) || !second.Started.After(resigned) {
		t.Errorf("b leads since %v, its term started %v; want the term's start, after a resigned (%v)", l.Since, second.Started, resigned)
	}
}
