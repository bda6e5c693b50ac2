package kubelock

import (
	"fmt"
	"time"

	"k8s.io/client-go/tools/leaderelection"
)

// Timings are the durations of the elector a lock serves, as in client-go's
// LeaderElectionConfig and controller-runtime's manager.Options.
type Timings struct {
	// LeaseDuration is how long a follower waits after the record last
	// changed before it tries to take it over. With this lock a takeover
	// waits for the record to be gone instead; LeaseDuration only has to
	// satisfy client-go.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader retries failed renewals before
	// it stops leading.
	RenewDeadline time.Duration
	// RetryPeriod is the pause between two attempts, and between a
	// successful renewal and the next.
	RetryPeriod time.Duration
}

// DefaultTimings are client-go's and controller-runtime's default
// durations.
var DefaultTimings = Timings{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}

// CallTimeout bounds each Get, Create and Update of the lock, whatever the
// elector's context allows: half of RenewDeadline, and at least 1 s (the
// bound controller-runtime gives its own Lease client). client-go calls
// with no deadline while it follows; a call on a dead connection would
// otherwise never return and its candidate never lead. Within an Update
// that renews, each request gets half of RetryPeriod and is tried again,
// on the client's next endpoint, when it gets no answer or finds no
// leader: one member cut off from the others, or frozen, cannot hold a
// renewal until the term's deadline.
func (t Timings) CallTimeout() time.Duration { return max(t.RenewDeadline/2, time.Second) }

// check returns an error if an elector with t cannot renew a term of the
// lock's TTL in time, or if client-go would refuse t (NewLeaderElector).
//
// client-go's leader sends a renewal RetryPeriod after the previous call
// returned, and while renewals fail it tries again every RetryPeriod until
// RenewDeadline. A term ends when no renewal succeeded by the conservative
// deadline, TTL minus the safety margin after the last successful one was
// sent. The rule, TTL − margin ≥ 2 × RetryPeriod, keeps a leader whose etcd
// answers promptly in its term through one failed renewal; with less, one
// slow reply ends the term, and with TTL − margin below RetryPeriod every
// term ends before its first renewal.
func (c config) check() error {
	t := c.timings
	switch {
	case t.RetryPeriod <= 0 || t.RenewDeadline <= 0 || t.LeaseDuration <= 0:
		return invalid("timings %s must be positive", t)
	case float64(t.RenewDeadline) <= leaderelection.JitterFactor*float64(t.RetryPeriod):
		return invalid("timings %s: client-go requires RenewDeadline above %v × RetryPeriod", t, leaderelection.JitterFactor)
	case t.LeaseDuration <= t.RenewDeadline:
		return invalid("timings %s: client-go requires LeaseDuration above RenewDeadline", t)
	}
	margin := c.marginFor(c.ttl)
	if c.ttl-margin >= 2*t.RetryPeriod {
		return nil
	}
	return invalid("TTL %v with safety margin %v is too short for RetryPeriod %v: a term must outlast two renewal periods "+
		"(TTL - margin >= 2 x RetryPeriod); use a TTL of at least %v, or a RetryPeriod of at most %v",
		c.ttl, margin, t.RetryPeriod, c.minTTL(t.RetryPeriod), ((c.ttl - margin) / 2).Truncate(time.Millisecond))
}

// minTTL returns the shortest TTL in whole seconds (etcd's unit) that
// renewals every retry keep, with this config's margin.
func (c config) minTTL(retry time.Duration) time.Duration {
	ttl := time.Second
	for ttl-c.marginFor(ttl) < 2*retry {
		ttl += time.Second
	}
	return ttl
}

func (t Timings) String() string {
	return fmt.Sprintf("{LeaseDuration %v, RenewDeadline %v, RetryPeriod %v}", t.LeaseDuration, t.RenewDeadline, t.RetryPeriod)
}
