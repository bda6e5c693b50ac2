package kubelock

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
)

// ElectionConfig completes a client-go configuration with the lock and
// its durations, and refuses what the lock cannot honour.
func TestElectionConfigCompletesAndRefuses(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	a, b := newLock(t, cli, "a"), newLock(t, cli, "b")
	start, stop := func(context.Context) {}, func() {}
	for name, cfg := range map[string]leaderelection.LeaderElectionConfig{
		"another lock":  {Lock: b},
		"another retry": {RetryPeriod: time.Second},
		"coordinated":   {Coordinated: true},
	} {
		cfg.Callbacks.OnStartedLeading, cfg.Callbacks.OnStoppedLeading = start, stop
		if _, err := ElectionConfig(a, cfg); !errors.Is(err, ErrConflict) {
			t.Errorf("%s: ElectionConfig = %v, want ErrConflict", name, err)
		}
	}
	for _, cb := range []leaderelection.LeaderCallbacks{{OnStoppedLeading: stop}, {OnStartedLeading: start}} {
		if _, err := ElectionConfig(a, leaderelection.LeaderElectionConfig{Callbacks: cb}); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("a callback missing: ElectionConfig = %v, want ErrInvalidOption", err)
		}
	}
	if _, err := ElectionConfig(&Lock{}, leaderelection.LeaderElectionConfig{}); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("a Lock not made by New: ElectionConfig = %v, want ErrInvalidOption", err)
	}
	tm := a.Timings()
	cfg, err := ElectionConfig(a, leaderelection.LeaderElectionConfig{RenewDeadline: tm.RenewDeadline, ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: start, OnStoppedLeading: stop}})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Lock != a || cfg.LeaseDuration != tm.LeaseDuration || cfg.RenewDeadline != tm.RenewDeadline || cfg.RetryPeriod != tm.RetryPeriod ||
		cfg.Name != "ctl" || !cfg.ReleaseOnCancel {
		t.Errorf("ElectionConfig = %+v, want the lock, its timings %v, its name and the caller's ReleaseOnCancel", cfg, tm)
	}
	if _, err := leaderelection.NewLeaderElector(cfg); err != nil {
		t.Errorf("client-go refuses the configuration: %v", err)
	}
}

// The callback of an elector configured by ElectionConfig, written as for
// any lock (func(ctx)), runs on the term's context: it carries the term
// and ends with it when the record is deleted, while client-go still
// leads.
func TestElectionConfigCallbackEndsWithTheTerm(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	a := newLock(t, cli, "a")
	started, ended := make(chan Term, 1), make(chan error, 1)
	cfg, err := ElectionConfig(a, leaderelection.LeaderElectionConfig{
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				term, ok := TermFrom(ctx)
				if !ok {
					t.Error("the callback's context carries no term")
				}
				started <- term
				<-ctx.Done()
				ended <- context.Cause(ctx)
			},
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runElector(t, cfg)
	defer stop()
	term := <-started
	if term.Token() != mustTerm(t, a).Token() {
		t.Errorf("the callback's term %v, the lock's %v", term.Token(), mustTerm(t, a).Token())
	}
	if _, err := cli.Delete(ctxT(t), a.Key()); err != nil {
		t.Fatal(err)
	}
	if cause := <-ended; !errors.Is(cause, ErrRecordGone) {
		t.Errorf("the callback's context ended with %v, want ErrRecordGone", cause)
	}
}

// mismatches is a Metrics that reports each mismatch by field, and each
// concurrent elector as "ConcurrentElectors".
type mismatches chan string

func (m mismatches) TimingsMismatch(field string) {
	select {
	case m <- field:
	default:
	}
}

func (m mismatches) ConcurrentElectors() { m.TimingsMismatch("ConcurrentElectors") }

// An elector given other durations than the lock's is told apart within
// a few renewals: its LeaseDuration at once from the record, its
// RetryPeriod from the pace of its renewals.
func TestTimingsMismatchIsReported(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	got := make(mismatches, 100)
	a := newLock(t, cli, "a")
	if err := a.SetMetrics(got); err != nil {
		t.Fatal(err)
	}
	tm := a.Timings()
	stop := runElector(t, leaderelection.LeaderElectionConfig{
		Lock: a, LeaseDuration: tm.LeaseDuration + 2*time.Second, RenewDeadline: tm.RenewDeadline, RetryPeriod: tm.RetryPeriod / 3,
		Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: func(context.Context) {}, OnStoppedLeading: func() {}},
	})
	defer stop()
	seen := map[string]bool{}
	for !seen["LeaseDuration"] || !seen["RetryPeriod"] {
		select {
		case f := <-got:
			seen[f] = true
		case <-time.After(20 * tm.RetryPeriod):
			t.Fatalf("mismatches reported: %v; want LeaseDuration and RetryPeriod", seen)
		}
	}
}

// An elector at the lock's own durations is never reported.
func TestMatchingTimingsAreNotReported(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	got := make(mismatches, 100)
	a := newLock(t, cli, "a")
	if err := a.SetMetrics(got); err != nil {
		t.Fatal(err)
	}
	renewed := make(chan struct{}, 100)
	cfg, err := ElectionConfig(a, leaderelection.LeaderElectionConfig{
		Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: func(context.Context) {}, OnStoppedLeading: func() {}},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Lock = &renewals{Lock: a, renewed: renewed}
	stop := runElector(t, cfg)
	for range 2*offBeats + 1 {
		<-renewed
	}
	stop()
	if len(got) > 0 {
		t.Errorf("mismatch %q reported for an elector at the lock's durations", <-got)
	}
}

// renewals signals every successful Update.
type renewals struct {
	*Lock
	renewed chan struct{}
}

func (r *renewals) Update(ctx context.Context, ler rl.LeaderElectionRecord) error {
	err := r.Lock.Update(ctx, ler)
	if err == nil {
		r.renewed <- struct{}{}
	}
	return err
}

// offBeat tells client-go's pause after a renewal at the lock's
// RetryPeriod from one at another period.
func TestOffBeat(t *testing.T) {
	for _, c := range []struct {
		pause, retry time.Duration
		off          bool
	}{
		{2 * time.Second, 2 * time.Second, false},
		{2*time.Second + 300*time.Millisecond, 2 * time.Second, false},
		{time.Second, 2 * time.Second, true},
		{3 * time.Second, 2 * time.Second, true},
		{350 * time.Millisecond, 300 * time.Millisecond, false},
		{100 * time.Millisecond, 300 * time.Millisecond, true},
	} {
		if got := offBeat(c.pause, c.retry); got != c.off {
			t.Errorf("offBeat(%v, %v) = %v, want %v", c.pause, c.retry, got, c.off)
		}
	}
}
