// Package kubemetrics records a kubelock.Lock's metrics with Prometheus,
// on the caller's registry:
//
//	m, err := kubemetrics.New(prometheus.DefaultRegisterer, nil)
//	...
//	lk, err := kubelock.New(cli, "my-controller", podName, kubelock.DefaultTimings)
//	...
//	err = lk.SetMetrics(m)
//
// One Recorder may serve any number of locks.
package kubemetrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcdlock/etcdlock/pkg/kubelock"
)

// Recorder is the Prometheus implementation of kubelock.Metrics. Its
// metrics:
//
//	etcdlock_kube_timings_mismatch_total{field}    counter: the elector drives the lock at other durations than it was made for
//	etcdlock_kube_concurrent_electors_total        counter: a second elector started leading on a lock while another led
//
// Alert on any increase of either: the elector's LeaseDuration or
// RetryPeriod is not the lock's (kubelock.ElectionConfig sets them); two
// electors (two controller-runtime managers) ran on one lock at once,
// and the term ended for both.
type Recorder struct {
	mismatch   *prometheus.CounterVec
	concurrent prometheus.Counter
}

var _ kubelock.Metrics = (*Recorder)(nil)

// New creates the metrics and registers them on reg only, never globally;
// constLabels (may be nil) are added to every metric.
func New(reg prometheus.Registerer, constLabels prometheus.Labels) (*Recorder, error) {
	if reg == nil {
		return nil, errors.New("kubemetrics: nil Registerer")
	}
	r := &Recorder{mismatch: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "etcdlock", Subsystem: "kube", Name: "timings_mismatch_total", ConstLabels: constLabels,
		Help: "Writes (LeaseDuration) and runs of three renewals (RetryPeriod) that show the elector at other durations than the lock's.",
	}, []string{"field"}), concurrent: prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "etcdlock", Subsystem: "kube", Name: "concurrent_electors_total", ConstLabels: constLabels,
		Help: "Times a second elector started leading on a lock while another led (the term ended for both).",
	})}
	for _, c := range []prometheus.Collector{r.mismatch, r.concurrent} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// TimingsMismatch counts a mismatch of field.
func (r *Recorder) TimingsMismatch(field string) { r.mismatch.WithLabelValues(field).Inc() }

// ConcurrentElectors counts a second elector leading on a lock.
func (r *Recorder) ConcurrentElectors() { r.concurrent.Inc() }
