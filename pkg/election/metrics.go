package election

import "time"

// Metrics receives an Elector's measurements, for Config.Metrics. Package
// electionmetrics implements it with Prometheus; election itself depends on
// no metrics library. The methods are called from the elector's goroutines
// (LeaseRenewed concurrently with the others) and must return quickly.
type Metrics interface {
	// StartedLeading is called when a term starts, before
	// OnStartedLeading.
	StartedLeading()
	// StoppedLeading is called when a term ends, after OnStartedLeading
	// returned and before OnStoppedLeading. lost is nil when the term
	// ended by choice (Resign, Run's context ended, OnStartedLeading
	// returned); otherwise it wraps lock.ErrLost and the cause
	// (lock.ErrDeadlinePassed — the lease's or the key's deadline —,
	// lock.ErrLeaseRevoked, lock.ErrLeaseExpired, lock.ErrKeyDeleted,
	// ...; lockmetrics.LossReason names it).
	StoppedLeading(lost error)
	// LeaseRenewed is called after every renewal attempt of the lease
	// with its latency and error (nil on success).
	LeaseRenewed(latency time.Duration, err error)
}

// nopMetrics is the Metrics of an Elector without Config.Metrics.
type nopMetrics struct{}

func (nopMetrics) StartedLeading()                   {}
func (nopMetrics) StoppedLeading(error)              {}
func (nopMetrics) LeaseRenewed(time.Duration, error) {}
