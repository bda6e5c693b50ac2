// Package ctrlmanager sets up a controller-runtime manager to elect its
// leader with a kubelock.Lock, so that no Runnable of a leader runs beside
// the next leader's.
//
// controller-runtime starts the leader-election Runnables on contexts of
// its own, which it cancels only once client-go's elector has stopped
// leading — after RetryPeriod and RenewDeadline of failed renewals, and
// with ReleaseOnCancel another RenewDeadline — and once the Runnables that
// need no leader have stopped. etcd hands the record on a TTL after the
// last renewal, or at once when someone deletes it, so with the lock alone
// a Runnable outlives its term. Options ties every Runnable's context to
// the term instead (kubelock.Lock.RunContext): it ends, synchronously,
// before the lock sends any write that could let another candidate in.
package ctrlmanager

import (
	"context"
	"errors"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/etcdlock/etcdlock/pkg/kubelock"
)

// ErrConflict is returned by Options when opts already sets a field to a
// value other than the one the lock needs.
var ErrConflict = errors.New("ctrlmanager: option conflicts with the lock")

// Options returns opts with the manager's leader election set up on lk:
//
//   - LeaderElection on, with lk as LeaderElectionResourceLockInterface;
//   - LeaseDuration, RenewDeadline and RetryPeriod from lk.Timings(), the
//     durations New checked lk's TTL against;
//   - BaseContext returning lk.RunContext of opts.BaseContext's context
//     (or context.Background), called once, now: every Runnable's context
//     ends when the term under which the manager leads ends.
//
// A field of opts already set to another value — another resource lock,
// other durations — is an error wrapping ErrConflict, never overridden.
// LeaderElectionReleaseOnCancel is opts's: true releases the record when
// the manager stops, false leaves it in etcd for the TTL.
//
// When the term ends, all the manager's Runnables' contexts end, also
// those that need no leader (caches, webhooks, servers): the manager will
// stop anyway, as controller-runtime returns "leader election lost" from
// Start once client-go's elector gives up, and the process should exit.
func Options(lk *kubelock.Lock, opts manager.Options) (manager.Options, error) {
	if lk == nil {
		return opts, fmt.Errorf("%w: nil lock", kubelock.ErrInvalidOption)
	}
	if opts.LeaderElectionResourceLockInterface != nil && opts.LeaderElectionResourceLockInterface != lk {
		return opts, fmt.Errorf("%w: LeaderElectionResourceLockInterface is another lock", ErrConflict)
	}
	t := lk.Timings()
	if t.LeaseDuration == 0 {
		return opts, fmt.Errorf("%w: a Lock must be made by kubelock.New", kubelock.ErrInvalidOption)
	}
	for _, d := range []struct {
		name string
		set  **time.Duration
		want time.Duration
	}{
		{"LeaseDuration", &opts.LeaseDuration, t.LeaseDuration},
		{"RenewDeadline", &opts.RenewDeadline, t.RenewDeadline},
		{"RetryPeriod", &opts.RetryPeriod, t.RetryPeriod},
	} {
		if *d.set != nil && **d.set != d.want {
			return opts, fmt.Errorf("%w: %s %v, the lock's timings are %v (kubelock.New's timings)", ErrConflict, d.name, **d.set, t)
		}
		*d.set = &d.want
	}
	base := context.Background()
	if opts.BaseContext != nil {
		base = opts.BaseContext()
	}
	run := lk.RunContext(base)
	opts.BaseContext = func() context.Context { return run }
	opts.LeaderElection = true
	opts.LeaderElectionResourceLockInterface = lk
	return opts, nil
}
