package ctrlmanager_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// incarnation is one run of a candidate: its manager's options, and what
// to close when the manager has returned.
type incarnation struct {
	opts  manager.Options
	close func()
}

// candidate runs controller-runtime managers under one identity, one
// after another, as a pod that is restarted each time its manager exits,
// until its context ends. Every manager runs the work log's Runnable.
type candidate struct {
	who string
	// start makes the next incarnation's options.
	start func() (incarnation, error)

	mu     sync.Mutex
	cancel context.CancelFunc // the current manager's
	drop   func()             // the current incarnation's fault hook
}

// run runs managers until ctx ends; wg owns the goroutine.
func (c *candidate) run(t testing.TB, ctx context.Context, wg *sync.WaitGroup, cfg *rest.Config, log *workLog) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			inc, err := c.start()
			if err != nil {
				t.Error(err)
				return
			}
			inc.opts.Metrics = metricsserver.Options{BindAddress: "0"}
			inc.opts.Logger = logr.Discard()
			m, err := manager.New(cfg, inc.opts)
			if err == nil {
				err = m.Add(log.runnable(c.who))
			}
			if err != nil {
				inc.close()
				t.Error(err)
				return
			}
			mctx, cancel := context.WithCancel(ctx)
			c.mu.Lock()
			c.cancel = cancel
			c.mu.Unlock()
			_ = m.Start(mctx) // "leader election lost", or canceled
			cancel()
			inc.close()
		}
	}()
}

// stopManager cancels the current manager's context, as a graceful
// shutdown does.
func (c *candidate) stopManager() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel != nil {
		c.cancel()
	}
}

// cut stands between an elector and its resource lock: while cut, every
// call blocks until the cut heals or the call's context ends, as over a
// partitioned network.
type cut struct {
	rl.Interface
	mu   sync.Mutex
	heal chan struct{} // nil when not cut
}

func (c *cut) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.heal == nil {
		c.heal = make(chan struct{})
	}
}

func (c *cut) restore() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.heal != nil {
		close(c.heal)
		c.heal = nil
	}
}

func (c *cut) wait(ctx context.Context) error {
	c.mu.Lock()
	heal := c.heal
	c.mu.Unlock()
	if heal == nil {
		return nil
	}
	select {
	case <-heal:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *cut) Get(ctx context.Context) (*rl.LeaderElectionRecord, []byte, error) {
	if err := c.wait(ctx); err != nil {
		return nil, nil, err
	}
	return c.Interface.Get(ctx)
}

func (c *cut) Create(ctx context.Context, ler rl.LeaderElectionRecord) error {
	if err := c.wait(ctx); err != nil {
		return err
	}
	return c.Interface.Create(ctx, ler)
}

func (c *cut) Update(ctx context.Context, ler rl.LeaderElectionRecord) error {
	if err := c.wait(ctx); err != nil {
		return err
	}
	return c.Interface.Update(ctx, ler)
}

// failovers counts how long each fault took to the next leader's first
// moment of work.
type failovers map[string][]time.Duration

func (f failovers) report(t testing.TB) {
	t.Helper()
	for fault, ds := range f {
		var sum, worst time.Duration
		for _, d := range ds {
			sum += d
			worst = max(worst, d)
		}
		t.Logf("%s: %d failovers, mean %v, worst %v", fault, len(ds),
			(sum / time.Duration(len(ds))).Round(10*time.Millisecond), worst.Round(10*time.Millisecond))
	}
}
