package lockmetrics_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/lock"
	"github.com/etcdlock/etcdlock/pkg/lock/lockmetrics"
)

var cluster *etcdtest.Shared

func TestMain(m *testing.M) {
	cluster = etcdtest.Start()
	os.Exit(etcdtest.RunMain(m, func() { cluster.Close() }))
}

// value reads the current value of the gauge or counter called name with labels (name, value, ...),
// or a histogram's sample count.
func value(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			if !hasLabels(m, labels) {
				continue
			}
			switch {
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return 0
}

func hasLabels(m *dto.Metric, kv []string) bool {
	for i := 0; i+1 < len(kv); i += 2 {
		found := false
		for _, lp := range m.Label {
			if lp.GetName() == kv[i] && lp.GetValue() == kv[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// The recorder follows real sessions: waiting while queued, held while
// active, a wait observed per acquisition, a loss counted by its cause,
// renewals observed; two sessions share one recorder.
func TestRecorderFollowsSessions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reg := prometheus.NewRegistry()
	m, err := lockmetrics.New(reg, prometheus.Labels{"app": "test"})
	if err != nil {
		t.Fatal(err)
	}
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	opts := []lock.SessionOption{lock.WithPrefix("/lockmetrics/"), lock.WithTTL(3 * time.Second), lock.WithRenewInterval(100 * time.Millisecond), lock.WithMetrics(m)}
	a, err := lock.NewSession(ctx, cli, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	b, err := lock.NewSession(ctx, cli, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)

	la, err := a.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if held, waiting := value(t, reg, "etcdlock_lock_held"), value(t, reg, "etcdlock_lock_waiting"); held != 1 || waiting != 0 {
		t.Fatalf("after one acquisition: held %v waiting %v, want 1 0", held, waiting)
	}
	got := make(chan *lock.Lock)
	go func() {
		lb, err := b.Acquire(ctx, "job")
		if err != nil {
			t.Error(err)
		}
		got <- lb
	}()
	etcdtest.Eventually(t, 10*time.Second, func() bool { return value(t, reg, "etcdlock_lock_waiting") == 1 }, "the queued acquisition is not counted as waiting")
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lb := <-got
	if held, waiting := value(t, reg, "etcdlock_lock_held"), value(t, reg, "etcdlock_lock_waiting"); held != 1 || waiting != 0 {
		t.Fatalf("after the handoff: held %v waiting %v, want 1 0", held, waiting)
	}
	if n := value(t, reg, "etcdlock_lock_wait_seconds"); n != 2 {
		t.Errorf("wait observations %v, want 2", n)
	}
	if _, err := cli.Delete(ctx, lb.Key()); err != nil {
		t.Fatal(err)
	}
	<-lb.Context().Done()
	if lost := value(t, reg, "etcdlock_lock_lost_total", "reason", "key_deleted"); lost != 1 {
		t.Errorf("lost_total{reason=key_deleted} = %v, want 1", lost)
	}
	if held := value(t, reg, "etcdlock_lock_held"); held != 0 {
		t.Errorf("held after the loss = %v, want 0", held)
	}
	if n := value(t, reg, "etcdlock_lock_held_seconds"); n != 2 {
		t.Errorf("held observations %v, want 2 (one release, one loss)", n)
	}
	etcdtest.Eventually(t, 10*time.Second, func() bool { return value(t, reg, "etcdlock_lease_renew_duration_seconds") > 0 }, "no renewal observed")
	// A canceled acquisition stops waiting without ever being held.
	la2, err := a.Acquire(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer ccancel()
	if _, err := b.Acquire(cctx, "other"); err == nil {
		t.Fatal("acquired a held name")
	}
	if held, waiting := value(t, reg, "etcdlock_lock_held"), value(t, reg, "etcdlock_lock_waiting"); held != 1 || waiting != 0 {
		t.Errorf("after a canceled acquisition: held %v waiting %v, want 1 0", held, waiting)
	}
	if err := la2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if held := value(t, reg, "etcdlock_lock_held"); held != 0 {
		t.Errorf("held after every release = %v", held)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 7 {
		t.Errorf("%d metrics registered (%v), want 7", n, err)
	}
}

func TestNewRejectsNilRegistry(t *testing.T) {
	if _, err := lockmetrics.New(nil, nil); err == nil {
		t.Fatal("New(nil) succeeded")
	}
}
