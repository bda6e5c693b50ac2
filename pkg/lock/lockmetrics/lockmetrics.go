// Package lockmetrics records the lock sessions' metrics with Prometheus,
// on the caller's registry. It is kept out of package lock, so that
// programs that do not export metrics — the etcdlock command among them —
// do not link the Prometheus client.
//
//	m, err := lockmetrics.New(prometheus.DefaultRegisterer, nil)
//	...
//	s, err := lock.NewSession(ctx, cli, lock.WithMetrics(m))
//
// (ExampleNew, which the tests compile.)
// One Recorder may serve any number of sessions: the gauges are totals
// over them.
package lockmetrics

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcdlock/etcdlock/pkg/lock"
)

// Recorder is the Prometheus implementation of lock.Metrics. Its metrics:
//
//	etcdlock_lock_waiting                       gauge: acquisitions in progress (waiting for their turn)
//	etcdlock_lock_held                          gauge: locks active now
//	etcdlock_lock_wait_seconds                  histogram: time from the start of an acquisition to active
//	etcdlock_lock_held_seconds                  histogram: time locks stayed active, released or lost
//	etcdlock_lock_lost_total{reason}            counter: active locks lost, by LossReason
//	etcdlock_lease_renew_duration_seconds       histogram: latency of successful lease renewals
//	etcdlock_lease_renew_failures_total         counter: failed renewal attempts
//
// What to alert on: any increase of lost_total (a holder stopped early:
// etcd slow or unreachable, or a key deleted by hand), a renewal p99
// approaching a third of the TTL, failures that persist, and a waiting
// gauge that only grows.
type Recorder struct {
	waiting, held prometheus.Gauge
	wait, heldFor prometheus.Histogram
	lost          *prometheus.CounterVec
	renew         prometheus.Histogram
	renewFailures prometheus.Counter
}

var _ lock.Metrics = (*Recorder)(nil)

// New creates the metrics and registers them on reg only, never globally;
// constLabels (may be nil) are added to every metric, to tell several
// Recorders on one registry apart. Registering a second Recorder with the
// same labels on one registry fails.
func New(reg prometheus.Registerer, constLabels prometheus.Labels) (*Recorder, error) {
	if reg == nil {
		return nil, errors.New("lockmetrics: nil Registerer")
	}
	latency := prometheus.ExponentialBuckets(0.0005, 2, 16) // 0.5 ms … 16 s
	m := &Recorder{
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "etcdlock", Subsystem: "lock", Name: "waiting", ConstLabels: constLabels,
			Help: "Acquisitions in progress.",
		}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "etcdlock", Subsystem: "lock", Name: "held", ConstLabels: constLabels,
			Help: "Locks active now.",
		}),
		wait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "etcdlock", Subsystem: "lock", Name: "wait_seconds", ConstLabels: constLabels,
			Help: "Time from the start of an acquisition until the lock was active.", Buckets: latency,
		}),
		heldFor: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "etcdlock", Subsystem: "lock", Name: "held_seconds", ConstLabels: constLabels,
			Help: "Time locks stayed active before their release or loss.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 12),
		}),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "etcdlock", Subsystem: "lock", Name: "lost_total", ConstLabels: constLabels,
			Help: "Active locks lost, by reason (deadline, lease_revoked, lease_expired, key_deleted, break_requested, watch_refused, other).",
		}, []string{"reason"}),
		renew: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "etcdlock", Subsystem: "lease", Name: "renew_duration_seconds", ConstLabels: constLabels,
			Help: "Latency of successful lease renewals.", Buckets: latency,
		}),
		renewFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "etcdlock", Subsystem: "lease", Name: "renew_failures_total", ConstLabels: constLabels,
			Help: "Failed lease renewal attempts (each retried until the session's deadline).",
		}),
	}
	for _, c := range []prometheus.Collector{m.waiting, m.held, m.wait, m.heldFor, m.lost, m.renew, m.renewFailures} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("lockmetrics: register metrics: %w", err)
		}
	}
	return m, nil
}

// Waiting moves the waiting gauge.
func (m *Recorder) Waiting(delta int) { m.waiting.Add(float64(delta)) }

// Acquired counts a lock as held and observes its wait.
func (m *Recorder) Acquired(wait time.Duration) {
	m.held.Inc()
	m.wait.Observe(wait.Seconds())
}

// Ended counts a lock as no longer held, observes how long it was, and
// counts a loss by its reason.
func (m *Recorder) Ended(held time.Duration, lost error) {
	m.held.Dec()
	m.heldFor.Observe(held.Seconds())
	if lost != nil {
		m.lost.WithLabelValues(LossReason(lost)).Inc()
	}
}

// LeaseRenewed observes a successful renewal's latency, or counts a
// failure.
func (m *Recorder) LeaseRenewed(latency time.Duration, err error) {
	if err != nil {
		m.renewFailures.Inc()
		return
	}
	m.renew.Observe(latency.Seconds())
}

// LossReason names the cause of a loss for a metric label: "deadline"
// (lock.ErrDeadlinePassed), "lease_revoked", "lease_expired",
// "key_deleted", "break_requested", "watch_refused", else "other".
func LossReason(lost error) string {
	switch {
	case errors.Is(lost, lock.ErrDeadlinePassed):
		return "deadline"
	case errors.Is(lost, lock.ErrLeaseRevoked):
		return "lease_revoked"
	case errors.Is(lost, lock.ErrLeaseExpired):
		return "lease_expired"
	case errors.Is(lost, lock.ErrKeyDeleted):
		return "key_deleted"
	case errors.Is(lost, lock.ErrBreakRequested):
		return "break_requested"
	case errors.Is(lost, lock.ErrWatchRefused):
		return "watch_refused"
	}
	return "other"
}
