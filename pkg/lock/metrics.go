package lock

import (
	"errors"
	"time"
)

// Metrics receives a session's measurements (WithMetrics). Package
// lockmetrics implements it with Prometheus; this package depends on no
// metrics library. The methods are called from the session's and the
// callers' goroutines, concurrently, sometimes with the lock's own mutex
// held: they must return quickly and must not call back into the session
// or its locks.
type Metrics interface {
	// Waiting is called with +1 when an acquisition starts (Acquire,
	// TryAcquire) and with −1 when it ends, held or not.
	Waiting(delta int)
	// Acquired is called when an acquisition becomes active, with the
	// time since it started, on the session's clock.
	Acquired(wait time.Duration)
	// Ended is called once for every lock that was active, when it
	// stops being active: lost is nil for a release (Release,
	// Session.Close or Abandon), else the *LostError saying why
	// (errors.Is it with ErrDeadlinePassed, ErrLeaseRevoked,
	// ErrLeaseExpired, ErrKeyDeleted, ErrBreakRequested, ErrWatchRefused).
	Ended(held time.Duration, lost error)
	// LeaseRenewed is called after every renewal attempt of the
	// session's lease with its latency and error (nil on success).
	LeaseRenewed(latency time.Duration, err error)
}

// WithMetrics sends the session's measurements to m: acquisitions waiting,
// locks held, wait times, losses by cause, renewal latency. Package
// lockmetrics provides a Prometheus m. It may be combined with
// WithRenewHook; both are called. m must not be nil. A SessionOption.
func WithMetrics(m Metrics) MetricsOption { return MetricsOption{m} }

// MetricsOption is what WithMetrics returns: a SessionOption.
type MetricsOption struct{ m Metrics }

func (o MetricsOption) set(c *config) error {
	if o.m == nil {
		return invalid("nil metrics")
	}
	c.metrics = o.m
	return nil
}

func (MetricsOption) sessionOption() {}

// nopMetrics is the Metrics of a session without WithMetrics.
type nopMetrics struct{}

func (nopMetrics) Waiting(int)                       {}
func (nopMetrics) Acquired(time.Duration)            {}
func (nopMetrics) Ended(time.Duration, error)        {}
func (nopMetrics) LeaseRenewed(time.Duration, error) {}

// LossReason names the cause of a loss for a metric label: "deadline"
// (ErrDeadlinePassed), "lease_revoked" (ErrLeaseRevoked), "lease_expired"
// (ErrLeaseExpired), "key_deleted" (ErrKeyDeleted), "break_requested"
// (ErrBreakRequested), "watch_refused" (ErrWatchRefused), else "other".
func LossReason(lost error) string {
	switch {
	case errors.Is(lost, ErrDeadlinePassed):
		return "deadline"
	case errors.Is(lost, ErrLeaseRevoked):
		return "lease_revoked"
	case errors.Is(lost, ErrLeaseExpired):
		return "lease_expired"
	case errors.Is(lost, ErrKeyDeleted):
		return "key_deleted"
	case errors.Is(lost, ErrBreakRequested):
		return "break_requested"
	case errors.Is(lost, ErrWatchRefused):
		return "watch_refused"
	}
	return "other"
}
