// Package lease computes when the holder of an etcd lease must stop
// trusting it. It is the one place for that rule, shared by package lock
// (sessions and detached grants, and through them package election) and
// by the Kubernetes resource lock in pkg/kubelock:
//
//	deadline = send time of the last successful renewal + TTL granted − margin
//	margin   = the one given, else max(TTL/10, MinMargin)
//
// etcd refreshes a lease when it receives a renewal, so it cannot expire
// the lease before send time + TTL; the holder stops margin earlier, which
// leaves room for its clock running slow against etcd's.
package lease

import "time"

// MinMargin is the smallest default safety margin.
const MinMargin = 250 * time.Millisecond

// DefaultMargin is the safety margin of a lease granted ttl when none is
// given: max(ttl/10, MinMargin).
func DefaultMargin(ttl time.Duration) time.Duration { return max(ttl/10, MinMargin) }

// Margin is margin if it is positive, else DefaultMargin(ttl).
func Margin(margin, ttl time.Duration) time.Duration {
	if margin > 0 {
		return margin
	}
	return DefaultMargin(ttl)
}

// Deadline is the moment the holder of a lease granted ttl must stop
// trusting it, given the send time of its grant or last successful
// renewal: sent + ttl − margin.
func Deadline(sent time.Time, ttl, margin time.Duration) time.Time { return sent.Add(ttl - margin) }

// Seconds is ttl rounded up to whole seconds, as etcd grants a lease. It
// does not overflow: the rounding never adds to ttl itself.
func Seconds(ttl time.Duration) int64 {
	s := int64(ttl / time.Second)
	if ttl%time.Second != 0 {
		s++
	}
	return s
}
