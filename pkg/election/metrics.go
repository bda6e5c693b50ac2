package election

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are registered on the caller's registry only; a nil *metrics
// records nothing.
type metrics struct {
	isLeader    prometheus.Gauge
	transitions prometheus.Counter
	renew       prometheus.Histogram
	lost        *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, name string) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	labels := prometheus.Labels{"election": name}
	m := &metrics{
		isLeader: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "etcdlock", Subsystem: "election", Name: "is_leader", ConstLabels: labels,
			Help: "1 while this replica leads the election, else 0.",
		}),
		transitions: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "etcdlock", Subsystem: "election", Name: "leader_transitions_total", ConstLabels: labels,
			Help: "Terms this replica has started.",
		}),
		renew: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "etcdlock", Subsystem: "election", Name: "lease_renew_duration_seconds", ConstLabels: labels,
			Help:    "Latency of successful lease renewals.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "etcdlock", Subsystem: "election", Name: "leadership_lost_total", ConstLabels: labels,
			Help: "Terms that ended because leadership could no longer be proven, by reason (deadline, lease_expired, key_deleted, other).",
		}, []string{"reason"}),
	}
	for _, c := range []prometheus.Collector{m.isLeader, m.transitions, m.renew, m.lost} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("election: register metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) started() {
	if m != nil {
		m.isLeader.Set(1)
		m.transitions.Inc()
	}
}

// stopped records the end of a term; reason is "" for a voluntary end.
func (m *metrics) stopped(reason string) {
	if m == nil {
		return
	}
	m.isLeader.Set(0)
	if reason != "" {
		m.lost.WithLabelValues(reason).Inc()
	}
}

func (m *metrics) observeRenew(latency time.Duration, err error) {
	if m != nil && err == nil {
		m.renew.Observe(latency.Seconds())
	}
}
