// Package electionmetrics records an election.Elector's metrics with
// Prometheus. It is kept out of package election so that programs that do
// not export metrics do not link the Prometheus client.
//
//	m, err := electionmetrics.New(prometheus.DefaultRegisterer, "my-controller")
//	...
//	e, err := election.New(election.Config{Name: "my-controller", Metrics: m, ...})
package electionmetrics

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcdlock/etcdlock/pkg/election"
	"github.com/etcdlock/etcdlock/pkg/lock/lockmetrics"
)

// Recorder is the Prometheus implementation of election.Metrics for one
// Elector. Its metrics, all labelled election=<name>:
//
//	etcdlock_election_is_leader                     gauge: 1 while leading, else 0
//	etcdlock_election_leader_transitions_total      counter: terms started
//	etcdlock_election_lease_renew_duration_seconds  histogram: latency of successful renewals
//	etcdlock_election_leadership_lost_total{reason} counter: lost terms by reason (lockmetrics.LossReason: deadline, lease_revoked, lease_expired, key_deleted, break_requested, watch_refused, other)
type Recorder struct {
	isLeader    prometheus.Gauge
	transitions prometheus.Counter
	renew       prometheus.Histogram
	lost        *prometheus.CounterVec
}

var _ election.Metrics = (*Recorder)(nil)

// New creates the metrics of the election name and registers them on reg
// only, never globally. Registering the same election's metrics twice on
// one registry fails: use one Recorder per Elector.
func New(reg prometheus.Registerer, name string) (*Recorder, error) {
	if reg == nil {
		return nil, errors.New("electionmetrics: nil Registerer")
	}
	labels := prometheus.Labels{"election": name}
	m := &Recorder{
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
			Help: "Terms that ended because leadership could no longer be proven, by reason (lockmetrics.LossReason: deadline, lease_revoked, lease_expired, key_deleted, break_requested, watch_refused, other).",
		}, []string{"reason"}),
	}
	for _, c := range []prometheus.Collector{m.isLeader, m.transitions, m.renew, m.lost} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("electionmetrics: register metrics: %w", err)
		}
	}
	return m, nil
}

// StartedLeading sets is_leader and counts the term.
func (m *Recorder) StartedLeading() {
	m.isLeader.Set(1)
	m.transitions.Inc()
}

// StoppedLeading clears is_leader and, for a lost term, counts the loss by
// its reason.
func (m *Recorder) StoppedLeading(lost error) {
	m.isLeader.Set(0)
	if lost != nil {
		m.lost.WithLabelValues(lockmetrics.LossReason(lost)).Inc()
	}
}

// LeaseRenewed observes the latency of a successful renewal.
func (m *Recorder) LeaseRenewed(latency time.Duration, err error) {
	if err == nil {
		m.renew.Observe(latency.Seconds())
	}
}
