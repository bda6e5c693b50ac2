package kubelock

import (
	"time"

	"go.uber.org/zap"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Metrics receives the lock's measurements (SetMetrics). Package
// kubemetrics implements it with Prometheus. The methods are called from
// the elector's goroutines, with the lock's mutex held: they must return
// quickly and must not call back into the lock.
type Metrics interface {
	// TimingsMismatch is called when the elector drives the lock at
	// other durations than it was made for (New's timings): field is
	// "LeaseDuration" at every write whose LeaseDurationSeconds differs,
	// "RetryPeriod" at every third renewal in a row whose pause after the
	// previous one is off the lock's RetryPeriod. RenewDeadline is not
	// checked: the lock could see it only in how long a failing elector
	// keeps renewing before it stops leading, which a stopped elector cuts
	// short too. It costs no safety either way — the term, and its
	// contexts, end at the lock's own deadline — but a longer one keeps
	// the elector leading after its term (Lock.Healthz fails when it runs
	// well past the lock's), and a shorter one gives up terms the lock
	// would have kept.
	TimingsMismatch(field string)
	// ConcurrentElectors is called when a second elector starts leading
	// on the lock while another leads, which ends the term
	// (ErrConcurrentElectors).
	ConcurrentElectors()
}

type nopMetrics struct{}

func (nopMetrics) TimingsMismatch(string) {}
func (nopMetrics) ConcurrentElectors()    {}

// offBeats is how many renewals in a row must come off RetryPeriod before
// the lock says the elector's RetryPeriod is not its own.
const offBeats = 3

// cadence follows the pace of the elector's renewals. client-go's leader
// sends the next renewal RetryPeriod after a successful one returned
// (wait.Until, sliding, no jitter), and writes its LeaseDuration in whole
// seconds into every record. Guarded by Lock.mu.
type cadence struct {
	renewed time.Time       // when the last successful Update returned; zero after a failure or a Create
	off     int             // renewals in a row whose pause was off RetryPeriod
	said    map[string]bool // the mismatches logged already, by field
}

// offBeat reports whether pause, from a successful renewal's return to
// the next renewal, is not RetryPeriod, allowing a quarter of it (at
// least 100 ms) for scheduling.
func offBeat(pause, retry time.Duration) bool {
	tol := max(retry/4, 100*time.Millisecond)
	return pause < retry-tol || pause > retry+tol
}

// leaseSeconds is what client-go writes as LeaseDurationSeconds for d.
func leaseSeconds(d time.Duration) int { return int(d / time.Second) }

// checkRecordLocked reports a record written with another LeaseDuration than
// the lock's. l.mu is held.
func (l *Lock) checkRecordLocked(ler rl.LeaderElectionRecord) {
	if want := leaseSeconds(l.cfg.timings.LeaseDuration); ler.LeaseDurationSeconds != want {
		l.mismatchLocked("LeaseDuration", time.Duration(ler.LeaseDurationSeconds)*time.Second, l.cfg.timings.LeaseDuration)
	}
}

// renewalStartingLocked notes that a renewal starts now, and reports an elector
// whose renewals keep coming off RetryPeriod. l.mu is held.
func (l *Lock) renewalStartingLocked(now time.Time) {
	c := &l.cadence
	if c.renewed.IsZero() {
		return
	}
	pause := now.Sub(c.renewed)
	if !offBeat(pause, l.cfg.timings.RetryPeriod) {
		c.off = 0
		return
	}
	if c.off++; c.off >= offBeats {
		c.off = 0
		l.mismatchLocked("RetryPeriod", pause, l.cfg.timings.RetryPeriod)
	}
}

// mismatchLocked counts a mismatch and logs the first of each field.
// l.mu is held.
func (l *Lock) mismatchLocked(field string, got, want time.Duration) {
	l.metrics.TimingsMismatch(field)
	if l.cadence.said[field] {
		return
	}
	if l.cadence.said == nil {
		l.cadence.said = map[string]bool{}
	}
	l.cadence.said[field] = true
	l.logger.Warn("the elector runs at other durations than the lock was made for: give it Lock.Timings, or use ElectionConfig",
		zap.String("field", field), zap.Duration("observed", got), zap.Duration("lock", want))
}
