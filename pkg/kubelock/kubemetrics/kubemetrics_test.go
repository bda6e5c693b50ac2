package kubemetrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A mismatch is counted by field, on the caller's registry only.
func TestRecorder(t *testing.T) {
	reg := prometheus.NewRegistry()
	r, err := New(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.TimingsMismatch("RetryPeriod")
	r.TimingsMismatch("RetryPeriod")
	if got := testutil.ToFloat64(r.mismatch.WithLabelValues("RetryPeriod")); got != 2 {
		t.Errorf("RetryPeriod mismatches = %v, want 2", got)
	}
	r.ConcurrentElectors()
	if got := testutil.ToFloat64(r.concurrent); got != 1 {
		t.Errorf("concurrent electors = %v, want 1", got)
	}
	if _, err := New(reg, nil); err == nil {
		t.Error("a second Recorder with the same labels registered")
	}
	if _, err := New(nil, nil); err == nil {
		t.Error("New(nil) succeeded")
	}
}
