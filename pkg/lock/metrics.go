package lock

import "time"

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

// WithMetrics sends the session's measurements to m (package lockmetrics
// records them with Prometheus); m must not be nil. A SessionOption.
func WithMetrics(m Metrics) forSession {
	return func(c *config) error {
		if m == nil {
			return invalid("nil metrics")
		}
		c.metrics = m
		return nil
	}
}

// nopMetrics is the Metrics of a session without WithMetrics.
type nopMetrics struct{}

func (nopMetrics) Waiting(int)                       {}
func (nopMetrics) Acquired(time.Duration)            {}
func (nopMetrics) Ended(time.Duration, error)        {}
func (nopMetrics) LeaseRenewed(time.Duration, error) {}
