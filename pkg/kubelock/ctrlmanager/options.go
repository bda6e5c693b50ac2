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
// A process frozen past its term (SIGSTOP, a VM pause) sees that only when
// it resumes, and may do one more unit of work beside the next leader:
// fence the writes with the term's token.
package ctrlmanager

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/etcdlock/etcdlock/pkg/kubelock"
)

// ErrConflict is wrapped by Options' error when opts sets a field to a
// value the lock cannot honour. It is kubelock.ErrConflict.
var ErrConflict = kubelock.ErrConflict

// Options returns opts with the manager's leader election set up on lk.
// It honours opts.LeaderElection as given, as controller-runtime does:
// false (the zero value; kubebuilder's --leader-elect flag off) returns
// opts unchanged, and the manager runs without an election and without
// etcd. With true it sets:
//
//   - lk as LeaderElectionResourceLockInterface;
//   - LeaseDuration, RenewDeadline and RetryPeriod from lk.Timings(), the
//     durations New checked lk's TTL against;
//   - a BaseContext that returns, at each call, lk.RunContext of
//     opts.BaseContext's context (or context.Background): every Runnable's
//     context ends when the term under which that manager leads ends.
//
// The result may be given to any number of managers, one after another
// (a main loop that makes a new manager after "leader election lost"):
// each gets contexts of its own, made when controller-runtime asks for
// them. Only one of them may run at a time, as lk serves one elector: two
// run at once would both lead the same term (the record carries their
// common identity), so the lock ends that term for both as soon as the
// second leads (kubelock.ErrConcurrentElectors, with an error log and
// kubelock.Metrics.ConcurrentElectors) and both managers return "leader
// election lost"; the second's leader-only Runnables start, if at all, on
// a canceled context.
//
// A field of opts that lk cannot honour is an error wrapping ErrConflict,
// whatever LeaderElection says, never overridden: another resource lock,
// other durations, a LeaderElectionID other than lk.Name(), and any
// LeaderElectionNamespace, LeaderElectionResourceLock,
// LeaderElectionConfig or LeaderElectionLabels (they configure the
// Kubernetes lock this one replaces). LeaderElectionReleaseOnCancel is
// opts's: true releases the record when the manager stops, false leaves
// it in etcd for the TTL.
//
// When the term ends, all the manager's Runnables' contexts end, also
// those that need no leader (caches, webhooks, servers): the manager will
// stop anyway, as controller-runtime returns "leader election lost" from
// Start once client-go's elector gives up, and the process should exit or
// make a new manager.
func Options(lk *kubelock.Lock, opts manager.Options) (manager.Options, error) {
	if lk == nil {
		return opts, fmt.Errorf("%w: nil lock", kubelock.ErrInvalidOption)
	}
	t := lk.Timings()
	if t.LeaseDuration == 0 {
		return opts, fmt.Errorf("%w: a Lock must be made by kubelock.New", kubelock.ErrInvalidOption)
	}
	if err := conflicts(lk, opts); err != nil {
		return opts, err
	}
	if !opts.LeaderElection {
		return opts, nil
	}
	opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = &t.LeaseDuration, &t.RenewDeadline, &t.RetryPeriod
	base := opts.BaseContext
	opts.BaseContext = func() context.Context {
		parent := context.Background()
		if base != nil {
			parent = base()
		}
		return lk.RunContext(parent)
	}
	opts.LeaderElectionResourceLockInterface = lk
	return opts, nil
}

// conflicts returns an error wrapping ErrConflict for the first field of
// opts that lk cannot honour.
func conflicts(lk *kubelock.Lock, opts manager.Options) error {
	switch {
	case opts.LeaderElectionResourceLockInterface != nil && opts.LeaderElectionResourceLockInterface != lk:
		return fmt.Errorf("%w: LeaderElectionResourceLockInterface is another lock", ErrConflict)
	case opts.LeaderElectionID != "" && opts.LeaderElectionID != lk.Name():
		return fmt.Errorf("%w: LeaderElectionID %q, the lock's election is %q", ErrConflict, opts.LeaderElectionID, lk.Name())
	case opts.LeaderElectionNamespace != "":
		return fmt.Errorf("%w: LeaderElectionNamespace %q: the record is an etcd key (lock.WithPrefix), in no namespace", ErrConflict, opts.LeaderElectionNamespace)
	case opts.LeaderElectionResourceLock != "":
		return fmt.Errorf("%w: LeaderElectionResourceLock %q: the lock is %s", ErrConflict, opts.LeaderElectionResourceLock, lk.Describe())
	case opts.LeaderElectionConfig != nil:
		return fmt.Errorf("%w: LeaderElectionConfig: the lock talks to etcd, not to an API server", ErrConflict)
	case len(opts.LeaderElectionLabels) > 0:
		return fmt.Errorf("%w: LeaderElectionLabels: the record is an etcd key, which has no labels", ErrConflict)
	}
	t := lk.Timings()
	for _, d := range []struct {
		name string
		set  *time.Duration
		want time.Duration
	}{
		{"LeaseDuration", opts.LeaseDuration, t.LeaseDuration},
		{"RenewDeadline", opts.RenewDeadline, t.RenewDeadline},
		{"RetryPeriod", opts.RetryPeriod, t.RetryPeriod},
	} {
		if d.set != nil && *d.set != d.want {
			return fmt.Errorf("%w: %s %v, the lock's timings are %v (kubelock.New's timings)", ErrConflict, d.name, *d.set, t)
		}
	}
	return nil
}
