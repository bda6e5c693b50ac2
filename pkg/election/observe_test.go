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
	leaders, err := election.Observe(ctx, cli, "ctl", lock.WithPrefix(prefix(t)))
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
	a := start(t, election.Config{Identity: "a", ReleaseOnCancel: true, Callbacks: election.Callbacks{
		OnStartedLeading: func(ctx context.Context, _ election.Term) { <-ctx.Done() },
	}})
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

// A nil client or an invalid name or option is an error from Observe
// itself, the same as GetLeader's, and no channel (a nil client used to
// panic on Observe's goroutine, killing the process).
func TestObserveRejectsBadInput(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	for name, tc := range map[string]struct {
		cli  *clientv3.Client
		name string
		opts []lock.ReadOption
		want error
	}{
		"nil client":           {nil, "x", nil, lock.ErrInvalidOption},
		"empty name":           {cli, "", nil, lock.ErrInvalidName},
		"NUL in name":          {cli, "a\x00b", nil, lock.ErrInvalidName},
		"prefix without slash": {cli, "x", []lock.ReadOption{lock.WithPrefix("/el")}, lock.ErrInvalidOption},
		"nil option":           {cli, "x", []lock.ReadOption{nil}, lock.ErrInvalidOption},
	} {
		t.Run(name, func(t *testing.T) {
			ch, err := election.Observe(context.Background(), tc.cli, tc.name, tc.opts...)
			if !errors.Is(err, tc.want) || ch != nil {
				t.Errorf("Observe = %v, %v; want a nil channel and %v", ch, err, tc.want)
			}
			if _, gerr := election.GetLeader(context.Background(), tc.cli, tc.name, tc.opts...); !errors.Is(gerr, tc.want) {
				t.Errorf("GetLeader = %v, want %v", gerr, tc.want)
			}
		})
	}
}
