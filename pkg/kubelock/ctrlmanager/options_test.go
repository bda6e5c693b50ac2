package ctrlmanager_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/kubelock"
	"github.com/etcdlock/etcdlock/pkg/kubelock/ctrlmanager"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// Options sets the lock and its durations, and refuses fields already set
// to other values instead of overriding them.
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
		"another lock":  {LeaderElectionResourceLockInterface: other},
		"another retry": {RetryPeriod: &retry},
	} {
		if _, err := ctrlmanager.Options(lk, opts); !errors.Is(err, ctrlmanager.ErrConflict) {
			t.Errorf("%s: Options = %v, want ErrConflict", name, err)
		}
	}
	if _, err := ctrlmanager.Options(nil, manager.Options{}); !errors.Is(err, kubelock.ErrInvalidOption) {
		t.Errorf("nil lock: Options = %v, want ErrInvalidOption", err)
	}
	type key struct{}
	opts, err := ctrlmanager.Options(lk, manager.Options{
		LeaseDuration: &lease,
		BaseContext:   func() context.Context { return context.WithValue(context.Background(), key{}, "v") },
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
