package kubelock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/kubelock/internal/kubetest"
)

// Two controller-runtime managers with this lock run a leader-election
// Runnable one at a time, without a Kubernetes API server; the Runnable
// gets its term's token from the lock, and the second manager's term has
// a larger one after the first manager stops.
func TestControllerRuntimeManager(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	type run struct {
		who        string
		token      int64
		start, end time.Time
	}
	var (
		mu   sync.Mutex
		runs []run
	)
	started := make(chan string, 2)
	type mgr struct {
		cancel context.CancelFunc
		done   chan error
	}
	startManager := func(who string) mgr {
		l := newLock(t, cli, who)
		m, err := manager.New(kubetest.NoAPIServer(t), manager.Options{
			LeaderElection:                      true,
			LeaderElectionResourceLockInterface: l,
			LeaderElectionReleaseOnCancel:       true,
			Metrics:                             metricsserver.Options{BindAddress: "0"},
			Logger:                              logr.Discard(),
		})
		if err != nil {
			t.Fatal(err)
		}
		// A Runnable that does not say otherwise runs only on the leader.
		err = m.Add(manager.RunnableFunc(func(ctx context.Context) error {
			term, err := l.Term()
			if err != nil {
				return err
			}
			r := run{who: who, token: int64(term.Token()), start: time.Now()}
			started <- who
			select {
			case <-ctx.Done():
			case <-term.Context().Done():
			}
			r.end = time.Now()
			mu.Lock()
			runs = append(runs, r)
			mu.Unlock()
			return nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- m.Start(ctx) }()
		return mgr{cancel, done}
	}
	managers := map[string]mgr{"m0": startManager("m0"), "m1": startManager("m1")}
	stop := func(who string) {
		m := managers[who]
		m.cancel()
		if err := <-m.done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("%s: Start = %v", who, err)
		}
		delete(managers, who)
	}
	defer func() {
		for who := range managers {
			stop(who)
		}
	}()

	first := receive(t, started, 20*time.Second)
	select {
	case second := <-started:
		t.Fatalf("%s and %s both run the leader's Runnable", first, second)
	case <-time.After(2 * time.Second):
	}
	stop(first)
	second := receive(t, started, 20*time.Second)
	if second == first {
		t.Fatalf("%s ran again", second)
	}
	stop(second)

	mu.Lock()
	defer mu.Unlock()
	if len(runs) != 2 {
		t.Fatalf("runs: %+v", runs)
	}
	if runs[1].token <= runs[0].token || !runs[1].start.After(runs[0].end) {
		t.Errorf("second run %+v does not follow the first %+v", runs[1], runs[0])
	}
}

func receive[T any](t *testing.T, ch <-chan T, within time.Duration) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(within):
		t.Fatalf("nothing within %v", within)
		panic("unreachable")
	}
}
