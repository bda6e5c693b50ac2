package ctrlmanager_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/kubelock"
	"github.com/etcdlock/etcdlock/pkg/kubelock/ctrlmanager"
	"github.com/etcdlock/etcdlock/pkg/kubelock/internal/kubetest"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// Options sets the lock and its durations, and refuses fields already set
// to other values, or that only the Kubernetes lock reads, instead of
// overriding or ignoring them.
func TestOptionsRefusesConflicts(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	lk, err := kubelock.New(cli, "ctl", "a", kubelock.DefaultTimings, lock.WithPrefix("/ctrlmanager/options/"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := kubelock.New(cli, "ctl", "b", kubelock.DefaultTimings, lock.WithPrefix("/ctrlmanager/options/"))
	if err != nil {
		t.Fatal(err)
	}
	retry, lease := time.Second, kubelock.DefaultTimings.LeaseDuration
	for name, opts := range map[string]manager.Options{
		"another lock":        {LeaderElectionResourceLockInterface: other},
		"another retry":       {RetryPeriod: &retry},
		"another ID":          {LeaderElectionID: "other"},
		"a namespace":         {LeaderElectionNamespace: "kube-system"},
		"a resource lock":     {LeaderElectionResourceLock: "leases"},
		"a rest config":       {LeaderElectionConfig: &rest.Config{}},
		"labels":              {LeaderElectionLabels: map[string]string{"a": "b"}},
		"election off, an ID": {LeaderElection: false, LeaderElectionID: "other"},
	} {
		opts.LeaderElection = opts.LeaderElection || name != "election off, an ID"
		if _, err := ctrlmanager.Options(lk, opts); !errors.Is(err, ctrlmanager.ErrConflict) || !errors.Is(err, kubelock.ErrConflict) {
			t.Errorf("%s: Options = %v, want ErrConflict", name, err)
		}
	}
	if _, err := ctrlmanager.Options(nil, manager.Options{}); !errors.Is(err, kubelock.ErrInvalidOption) {
		t.Errorf("nil lock: Options = %v, want ErrInvalidOption", err)
	}
	type key struct{}
	opts, err := ctrlmanager.Options(lk, manager.Options{
		LeaderElection:   true,
		LeaderElectionID: "ctl", // the lock's own name is honoured
		LeaseDuration:    &lease,
		BaseContext:      func() context.Context { return context.WithValue(context.Background(), key{}, "v") },
	})
	if err != nil {
		t.Fatal(err)
	}
	tm := lk.Timings()
	if !opts.LeaderElection || opts.LeaderElectionResourceLockInterface != lk ||
		*opts.LeaseDuration != tm.LeaseDuration || *opts.RenewDeadline != tm.RenewDeadline || *opts.RetryPeriod != tm.RetryPeriod {
		t.Errorf("Options = %+v, want the lock and its timings %v", opts, tm)
	}
	ctx := opts.BaseContext()
	if ctx.Value(key{}) != "v" || ctx.Err() != nil {
		t.Errorf("BaseContext lost the caller's values or is done: %v", ctx.Err())
	}
}

// LeaderElection false, kubebuilder's --leader-elect off, is honoured:
// the options come back as given, and a manager made with them runs
// without an election (its leader-only Runnable starts with no etcd
// record written).
func TestOptionsLeavesElectionOff(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	lk, err := kubelock.New(cli, "ctl", "a", kubelock.DefaultTimings, lock.WithPrefix("/ctrlmanager/off/"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lk.Close(context.Background()) })
	opts, err := ctrlmanager.Options(lk, manager.Options{LeaderElection: false, LeaderElectionID: "ctl"})
	if err != nil {
		t.Fatal(err)
	}
	if opts.LeaderElection || opts.LeaderElectionResourceLockInterface != nil || opts.BaseContext != nil || opts.RetryPeriod != nil {
		t.Fatalf("Options with LeaderElection false = %+v, want them unchanged", opts)
	}
	run := make(chan error, 1)
	runManager(t, opts, reportStart(run), func(cancel context.CancelFunc, done <-chan error) {
		if err := started(t, run); err != nil {
			t.Errorf("leader-only Runnable started on a done context: %v", err)
		}
		if resp, err := cli.Get(context.Background(), lk.Key()); err != nil || len(resp.Kvs) != 0 {
			t.Errorf("the election's record exists (%v): the manager elected", err)
		}
		cancel()
		waitStart(t, done)
	})
}

// One Options value given to manager after manager, as a main loop that
// makes a new manager after "leader election lost" does: each manager,
// once it wins, runs its leader-only Runnable on a live context, under a
// new term, and its Start returns when the term ends or it is stopped.
func TestOptionsReused(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	s := short
	lk, err := kubelock.New(cli, "ctl", "a", s.timings, lock.WithPrefix("/ctrlmanager/reused/"),
		lock.WithTTL(s.ttl))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lk.Close(context.Background()) })
	opts, err := ctrlmanager.Options(lk, manager.Options{LeaderElection: true, LeaderElectionReleaseOnCancel: true})
	if err != nil {
		t.Fatal(err)
	}
	var last kubelock.Term
	for i := range 3 {
		run := make(chan error, 1)
		runManager(t, opts, reportStart(run), func(cancel context.CancelFunc, done <-chan error) {
			if err := started(t, run); err != nil {
				t.Errorf("manager %d: leader-only Runnable started on a done context: %v", i, err)
			}
			term, err := lk.Term()
			if err != nil || term.Token() <= last.Token() {
				t.Errorf("manager %d: term %v (%v), want a token above %v", i, term.Token(), err, last.Token())
			}
			last = term
			if i < 2 {
				// The term ends: the manager loses the election.
				if _, err := cli.Delete(context.Background(), lk.Key()); err != nil {
					t.Fatal(err)
				}
			} else {
				cancel()
			}
			waitStart(t, done)
		})
	}
}

// runManager starts a manager with opts and a leader-only Runnable run,
// calls check with the manager's cancel and the channel of Start's error,
// and returns once Start has returned.
func runManager(t *testing.T, opts manager.Options, run manager.RunnableFunc, check func(cancel context.CancelFunc, done <-chan error)) {
	t.Helper()
	opts.Metrics = metricsserver.Options{BindAddress: "0"}
	opts.Logger = logr.Discard()
	m, err := manager.New(kubetest.NoAPIServer(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Add(run); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done, stopped := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(stopped)
		done <- m.Start(ctx)
	}()
	check(cancel, done)
	cancel()
	<-stopped
}

// reportStart is a leader-only Runnable that sends its context's error on
// run when it starts, and runs until its context ends.
func reportStart(run chan<- error) func(context.Context) error {
	return func(ctx context.Context) error {
		run <- ctx.Err()
		<-ctx.Done()
		return nil
	}
}

// started waits, within a bound, for the Runnable's report of its
// context's error when it started.
func started[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("the leader-only Runnable did not start")
		var zero T
		return zero
	}
}

// waitStart fails t unless Start returns within a bound.
func waitStart(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		t.Logf("Start returned: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("Start did not return")
	}
}
