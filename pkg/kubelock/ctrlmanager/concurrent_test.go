package ctrlmanager_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/kubelock"
	"github.com/etcdlock/etcdlock/pkg/kubelock/ctrlmanager"
	"github.com/etcdlock/etcdlock/pkg/kubelock/internal/kubetest"
	"github.com/etcdlock/etcdlock/pkg/kubelock/kubemetrics"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// Two managers run at once on one Options value, against the rule: the
// second to lead must not run its leader-only Runnable beside the
// first's. The lock ends the term for both (ErrConcurrentElectors), and
// both managers lose the election.
func TestConcurrentManagersDoNotWorkSideBySide(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	s := short
	lk, err := kubelock.New(cli, "ctl", "a", s.timings, lock.WithPrefix("/ctrlmanager/concurrent/"), lock.WithTTL(s.ttl))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lk.Close(context.Background()) })
	reg := prometheus.NewRegistry()
	rec, err := kubemetrics.New(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.SetMetrics(rec); err != nil {
		t.Fatal(err)
	}
	opts, err := ctrlmanager.Options(lk, manager.Options{LeaderElection: true})
	if err != nil {
		t.Fatal(err)
	}
	opts.Metrics = metricsserver.Options{BindAddress: "0"}
	opts.Logger = logr.Discard()

	var mu sync.Mutex
	var live []context.Context // the contexts of the Runnables started so far
	overlaps := 0
	starts := make(chan struct{}, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	done := make(chan error, 2)
	for i := range 2 {
		m, err := manager.New(kubetest.NoAPIServer(t), opts)
		if err != nil {
			t.Fatal(err)
		}
		err = m.Add(manager.RunnableFunc(func(rctx context.Context) error {
			mu.Lock()
			if rctx.Err() == nil {
				for _, other := range live {
					if other.Err() == nil {
						overlaps++
					}
				}
			}
			live = append(live, rctx)
			mu.Unlock()
			starts <- struct{}{}
			<-rctx.Done()
			return nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := m.Start(ctx)
			done <- fmt.Errorf("manager %d: %w", i, err)
		}()
	}
	defer wg.Wait()
	defer cancel()
	// Both lead: the second's elector takes the record, of its own
	// identity, for its own.
	for range 2 {
		started(t, starts)
	}
	mu.Lock()
	if overlaps > 0 {
		t.Errorf("a leader-only Runnable started while the other manager's ran on a live context")
		cancel()
	}
	mu.Unlock()
	for range 2 {
		waitStart(t, done)
	}
	if n := counter(t, reg, "etcdlock_kube_concurrent_electors_total"); n < 1 {
		t.Errorf("concurrent electors counted %v times, want at least once", n)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, c := range live {
		if cause := context.Cause(c); !errors.Is(cause, kubelock.ErrConcurrentElectors) {
			t.Errorf("Runnable %d's context ended with %v, want ErrConcurrentElectors", i, cause)
		}
	}
}

// counter returns the value of the counter name gathered from reg (0 if
// it has none).
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}
