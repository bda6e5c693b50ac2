package ctrlmanager_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
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
	// token, if not nil, returns the fencing token of the term under
	// which the manager leads; the work log records it with each run.
	token func() int64

	// elector is the last message of the current manager's elector.
	elector lastMessage

	mu      sync.Mutex
	cancel  context.CancelFunc // the current manager's
	since   time.Time          // when the current manager was made
	running bool               // the current manager's Start has not returned
	held    chan struct{}      // while not nil, no new manager starts; closed by up
}

// run runs managers until ctx ends; wg owns the goroutine.
func (c *candidate) run(t testing.TB, ctx context.Context, wg *sync.WaitGroup, cfg *rest.Config, log *workLog) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			c.mu.Lock()
			held := c.held
			c.mu.Unlock()
			if held != nil {
				select {
				case <-held:
				case <-ctx.Done():
					return
				}
			}
			inc, err := c.start()
			if err != nil {
				t.Error(err)
				return
			}
			inc.opts.Metrics = metricsserver.Options{BindAddress: "0"}
			inc.opts.Logger = logr.New(c.elector.sink())
			m, err := manager.New(cfg, inc.opts)
			if err == nil {
				err = m.Add(log.runnable(c.who, c.token))
			}
			if err != nil {
				inc.close()
				t.Error(err)
				return
			}
			mctx, cancel := context.WithCancel(ctx)
			c.mu.Lock()
			c.cancel, c.since, c.running = cancel, time.Now(), true
			c.mu.Unlock()
			_ = m.Start(mctx) // "leader election lost", or canceled
			c.mu.Lock()
			c.running = false
			c.mu.Unlock()
			cancel()
			inc.close()
		}
	}()
}

// down cancels the current manager's context, as a graceful shutdown
// does, and starts no other until up: the pod is gone (a new pod has
// another identity).
func (c *candidate) down() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel != nil {
		c.cancel()
	}
	if c.held == nil {
		c.held = make(chan struct{})
	}
}

// up lets the candidate start managers again.
func (c *candidate) up() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held != nil {
		close(c.held)
		c.held = nil
	}
}

// failovers are what drive saw of each fault, by name.
type failovers map[string]*faultStats

// faultStats is what drive saw of one fault.
type faultStats struct {
	// took: from the fault to the next leader's first work.
	took []time.Duration
	// after: from the fault to the faulty leader's last work.
	after []time.Duration
	// overlaps: by how much the faulty leader's work overlapped the next
	// leader's, for each failover where it did.
	overlaps []time.Duration
	// kept counts the faults after which the leader kept its term.
	kept int
	// elected: took, of the failovers during which etcd elected a leader.
	elected []time.Duration
}

func (f failovers) stats(fault string) *faultStats {
	s := f[fault]
	if s == nil {
		s = &faultStats{}
		f[fault] = s
	}
	return s
}

// add adds g's figures to f.
func (f failovers) add(g failovers) {
	for name, s := range g {
		a := f.stats(name)
		a.took = append(a.took, s.took...)
		a.after = append(a.after, s.after...)
		a.overlaps = append(a.overlaps, s.overlaps...)
		a.kept += s.kept
		a.elected = append(a.elected, s.elected...)
	}
}

// meanWorst returns the mean and the largest of ds, rounded.
func meanWorst(ds []time.Duration) (mean, worst time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
		worst = max(worst, d)
	}
	return (sum / time.Duration(len(ds))).Round(10 * time.Millisecond), worst.Round(10 * time.Millisecond)
}

// report logs what each fault did.
func (f failovers) report(t testing.TB) {
	t.Helper()
	for _, l := range f.lines() {
		t.Log(l)
	}
}

// lines says what each fault did, a line per fault.
func (f failovers) lines() []string {
	names := make([]string, 0, len(f))
	for name := range f {
		names = append(names, name)
	}
	slices.Sort(names)
	var out []string
	for _, name := range names {
		s := f[name]
		mean, worst := meanWorst(s.took)
		amean, aworst := meanWorst(s.after)
		_, oworst := meanWorst(s.overlaps)
		emean, eworst := meanWorst(s.elected)
		out = append(out, fmt.Sprintf("%-9s %2d failovers: next leader mean %v, worst %v; old leader's last work mean %v, worst %v after the fault; "+
			"%d overlapped (worst %v); %d kept by the leader; %d with an etcd leader election (mean %v, worst %v)",
			name, len(s.took), mean, worst, amean, aworst, len(s.overlaps), oworst, s.kept, len(s.elected), emean, eworst))
	}
	return out
}

// lastMessage keeps the last message logged through its sinks, which
// controller-runtime hands to client-go's elector: what its latest
// attempt did, or why it failed.
type lastMessage struct{ v atomic.Value }

// Last returns the last message, or "".
func (m *lastMessage) Last() string {
	s, _ := m.v.Load().(string)
	return s
}

func (m *lastMessage) sink() logr.LogSink { return messageSink{m: m} }

// messageSink is a logr.LogSink that stores each message, with its
// values, in m, and keeps nothing else.
type messageSink struct {
	m      *lastMessage
	name   string
	values []any
}

func (s messageSink) Init(logr.RuntimeInfo) {}
func (s messageSink) Enabled(int) bool      { return true }
func (s messageSink) Info(_ int, msg string, kv ...any) {
	// "Failed to acquire lease" follows every failed attempt, after the
	// message that says why.
	if strings.HasPrefix(s.name, "leaderelection") && msg != "Failed to acquire lease" {
		s.m.v.Store(fmt.Sprint(msg, " ", append(slices.Clone(s.values), kv...)))
	}
}
func (s messageSink) Error(err error, msg string, kv ...any) { s.Info(0, msg+": "+err.Error(), kv...) }
func (s messageSink) WithValues(kv ...any) logr.LogSink {
	s.values = append(slices.Clone(s.values), kv...)
	return s
}
func (s messageSink) WithName(name string) logr.LogSink {
	if s.name != "" {
		name = s.name + "/" + name
	}
	s.name = name
	return s
}
