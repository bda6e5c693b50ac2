package kubelock

import (
	"fmt"
	"net/http"
	"time"
)

// Healthz is a health check of the elector that drives a lock, with the
// contract of client-go's HealthzAdaptor: it fails while the elector
// still leads — between its "became leader" and "stopped leading" — long
// after the term it leads under ended: the process runs on, but its
// leadership is over, so the kubelet should restart it. Check passes while
// the elector follows, and while it leads a live term.
type Healthz struct {
	l       *Lock
	timeout time.Duration
}

// Healthz returns the lock's health check. Its Check fails once the
// elector has led for RetryPeriod + RenewDeadline + Timings.CallTimeout +
// timeout past the end of its term: client-go's elector stops leading
// within the first three. Its Name and Check serve as a Kubernetes
// healthz.HealthChecker; Check alone as a controller-runtime
// healthz.Checker (manager.AddHealthzCheck).
func (l *Lock) Healthz(timeout time.Duration) *Healthz { return &Healthz{l: l, timeout: timeout} }

// Name returns "leaderElection", the name of client-go's check.
func (h *Healthz) Name() string { return "leaderElection" }

// Check returns an error if the elector still leads that long after its
// term ended.
func (h *Healthz) Check(*http.Request) error {
	l := h.l
	l.mu.Lock()
	leading, led := l.leaders > 0, l.led
	var ended time.Time
	var token int64
	if led != nil {
		ended, token = led.ended, int64(led.token)
	}
	l.mu.Unlock()
	t := l.cfg.timings
	return stale(leading, ended, time.Now(), t.RetryPeriod+t.RenewDeadline+t.CallTimeout()+h.timeout, token)
}

// stale returns an error if an elector that leads did so more than
// allowed past the end of its term (ended; zero while it lasts).
func stale(leading bool, ended, now time.Time, allowed time.Duration, token int64) error {
	if !leading || ended.IsZero() || now.Sub(ended) <= allowed {
		return nil
	}
	return fmt.Errorf("kubelock: the elector still leads %v after its term (token %d) ended", now.Sub(ended).Round(time.Millisecond), token)
}
