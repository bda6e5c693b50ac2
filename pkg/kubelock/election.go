package kubelock

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/tools/leaderelection"
)

// ElectionConfig returns cfg completed for client-go's LeaderElector on lk,
// so that keeping an elector and swapping its lock is one call:
//
//   - Lock is lk; LeaseDuration, RenewDeadline and RetryPeriod are
//     lk.Timings(), the durations New checked lk's TTL against; Name, if
//     empty, is lk.Name();
//   - Callbacks.OnStartedLeading runs with the term's context (Lock.Lead):
//     it ends as soon as the term does, not RenewDeadline later, and
//     carries the term (TermFrom).
//
// The rest of cfg is the caller's (ReleaseOnCancel, OnStoppedLeading,
// OnNewLeader, WatchDog). A field that lk cannot honour is an error
// wrapping ErrConflict, never overridden: another Lock, other durations,
// Coordinated. A nil OnStartedLeading or OnStoppedLeading is an error
// wrapping ErrInvalidOption, as client-go's NewLeaderElector refuses them.
func ElectionConfig(lk *Lock, cfg leaderelection.LeaderElectionConfig) (leaderelection.LeaderElectionConfig, error) {
	if lk == nil || lk.client == nil {
		return cfg, invalid("a Lock must be made by New")
	}
	if cfg.Lock != nil && cfg.Lock != lk {
		return cfg, fmt.Errorf("%w: Lock is another lock", ErrConflict)
	}
	if cfg.Coordinated {
		return cfg, fmt.Errorf("%w: Coordinated: coordinated leader election (LeaseCandidate) is not supported", ErrConflict)
	}
	if cfg.Callbacks.OnStartedLeading == nil || cfg.Callbacks.OnStoppedLeading == nil {
		return cfg, invalid("nil OnStartedLeading or OnStoppedLeading")
	}
	t := lk.Timings()
	for _, d := range []struct {
		name string
		set  *time.Duration
		want time.Duration
	}{
		{"LeaseDuration", &cfg.LeaseDuration, t.LeaseDuration},
		{"RenewDeadline", &cfg.RenewDeadline, t.RenewDeadline},
		{"RetryPeriod", &cfg.RetryPeriod, t.RetryPeriod},
	} {
		if *d.set != 0 && *d.set != d.want {
			return cfg, fmt.Errorf("%w: %s %v, the lock's timings are %v (New's timings)", ErrConflict, d.name, *d.set, t)
		}
		*d.set = d.want
	}
	cfg.Lock = lk
	if cfg.Name == "" {
		cfg.Name = lk.Name()
	}
	run := cfg.Callbacks.OnStartedLeading
	cfg.Callbacks.OnStartedLeading = lk.Lead(func(ctx context.Context, _ Term) { run(ctx) })
	return cfg, nil
}

// termKey is the context key of the term Lead passes.
type termKey struct{}

// TermFrom returns the term carried by ctx: the context Lead gives its
// callback (and so ElectionConfig's OnStartedLeading), or one derived from
// it. ok is false for any other context.
func TermFrom(ctx context.Context) (t Term, ok bool) {
	t, ok = ctx.Value(termKey{}).(Term)
	return t, ok
}
