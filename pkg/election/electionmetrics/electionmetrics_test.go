package electionmetrics

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/etcdlock/etcdlock/pkg/lock"
	"github.com/etcdlock/etcdlock/pkg/lock/lockmetrics"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newRecorder(t *testing.T) *Recorder {
	t.Helper()
	m, err := New(prometheus.NewRegistry(), "ctl")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// is_leader follows the term, every term is counted, and only a lost term
// is counted as a loss.
func TestMetricsFollowTermsAndCountOnlyLostOnesAsLosses(t *testing.T) {
	m := newRecorder(t)
	m.StartedLeading()
	if got := testutil.ToFloat64(m.isLeader); got != 1 {
		t.Errorf("is_leader while leading = %v, want 1", got)
	}
	m.StoppedLeading(nil)
	if got := testutil.ToFloat64(m.isLeader); got != 0 {
		t.Errorf("is_leader after the term = %v, want 0", got)
	}
	if n := testutil.CollectAndCount(m.lost); n != 0 {
		t.Errorf("a term ended by choice was counted as lost (%d series)", n)
	}
	m.StartedLeading()
	m.StoppedLeading(&lock.LostError{Kind: lock.ErrLost, Cause: lock.ErrKeyDeleted})
	if got := testutil.ToFloat64(m.transitions); got != 2 {
		t.Errorf("leader_transitions_total = %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.lost.WithLabelValues("key_deleted")); got != 1 {
		t.Errorf("leadership_lost_total{reason=key_deleted} = %v, want 1", got)
	}
}

func TestLossReason(t *testing.T) {
	for cause, want := range map[error]string{
		lock.ErrDeadlinePassed: "deadline",
		lock.ErrLeaseRevoked:   "lease_revoked",
		lock.ErrLeaseExpired:   "lease_expired",
		lock.ErrKeyDeleted:     "key_deleted",
		lock.ErrWatchRefused:   "watch_refused",
		errors.New("other"):    "other",
	} {
		lost := &lock.LostError{Kind: lock.ErrLost, Cause: cause}
		if got := lockmetrics.LossReason(lost); got != want {
			t.Errorf("lossReason(%v) = %q, want %q", lost, got, want)
		}
	}
}

// Only successful renewals are observed.
func TestOnlySuccessfulRenewalsAreObserved(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg, "ctl")
	if err != nil {
		t.Fatal(err)
	}
	m.LeaseRenewed(3*time.Millisecond, nil)
	m.LeaseRenewed(time.Second, errors.New("timeout"))
	m.LeaseRenewed(5*time.Millisecond, nil)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "etcdlock_election_lease_renew_duration_seconds" {
			continue
		}
		if h := mf.GetMetric()[0].GetHistogram(); h.GetSampleCount() != 2 || h.GetSampleSum() != 0.008 {
			t.Errorf("renew histogram: %d samples summing to %vs, want 2 summing to 0.008s", h.GetSampleCount(), h.GetSampleSum())
		}
		return
	}
	t.Error("renew histogram not gathered")
}

// The metric names are part of the contract: dashboards and alerts use
// them.
func TestMetricNamesAreStable(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg, "ctl")
	if err != nil {
		t.Fatal(err)
	}
	m.StoppedLeading(&lock.LostError{Kind: lock.ErrLost, Cause: lock.ErrDeadlinePassed})
	for _, name := range []string{
		"etcdlock_election_is_leader",
		"etcdlock_election_leader_transitions_total",
		"etcdlock_election_lease_renew_duration_seconds",
		"etcdlock_election_leadership_lost_total",
	} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n != 1 {
			t.Errorf("%s: %d series, %v; want 1", name, n, err)
		}
	}
}

func TestNewRejects(t *testing.T) {
	if _, err := New(nil, "ctl"); err == nil {
		t.Error("New(nil) succeeded")
	}
	reg := prometheus.NewRegistry()
	if _, err := New(reg, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := New(reg, "x"); err == nil {
		t.Error("a second Recorder registered the same election's metrics without error")
	}
	if _, err := New(reg, "y"); err != nil {
		t.Errorf("another election's metrics on the same registry: %v", err)
	}
}
