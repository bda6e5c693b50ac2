package kubelock

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/pkg/v3/proxy"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"k8s.io/client-go/tools/leaderelection"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/kubelock/internal/kubetest"

	"github.com/etcdlock/etcdlock/pkg/lock"
)

// timings are an elector's durations and the lock's etcd lease TTL.
type timings struct {
	ttl, leaseDuration, renewDeadline, retryPeriod time.Duration
}

// elector returns the elector's durations.
func (tm timings) elector() Timings {
	return Timings{LeaseDuration: tm.leaseDuration, RenewDeadline: tm.renewDeadline, RetryPeriod: tm.retryPeriod}
}

// testTimings are short, with LeaseDuration far above the etcd lease TTL,
// so that a takeover sooner than LeaseDuration can only come from the
// record's etcd lease ending.
var testTimings = timings{
	ttl:           2 * time.Second,
	leaseDuration: 8 * time.Second,
	renewDeadline: 5 * time.Second,
	retryPeriod:   500 * time.Millisecond,
}

// led is one call of OnStartedLeading, as the controller saw it.
type led struct {
	who  string
	term Term
	// end is when the callback's context ended: the term's end, or
	// client-go's context's if that came first.
	end time.Time
	// clientGoEnd is when client-go's own OnStartedLeading context ended.
	clientGoEnd time.Time
}

// ledger records every term of every candidate.
type ledger struct {
	mu     sync.Mutex
	terms  []*led
	wg     sync.WaitGroup // callbacks and client-go context watchers
	change chan struct{}  // a term started or ended
}

func newLedger() *ledger { return &ledger{change: make(chan struct{}, 1)} }

func (lg *ledger) notify() {
	select {
	case lg.change <- struct{}{}:
	default:
	}
}

// onStartedLeading returns candidate who's OnStartedLeading: it records
// the term and runs until the context Lead gives it ends.
func (lg *ledger) onStartedLeading(who string, l *Lock) func(context.Context) {
	return lg.observeClientGo(who, l.Lead(lg.lead(who, l)))
}

// lead returns the callback of candidate who: it records the term and
// runs until its context ends.
func (lg *ledger) lead(who string, l *Lock) func(context.Context, Term) {
	return func(ctx context.Context, term Term) {
		rec := &led{who: who, term: term}
		lg.mu.Lock()
		lg.terms = append(lg.terms, rec)
		lg.mu.Unlock()
		lg.notify()
		<-ctx.Done()
		end := time.Now()
		l.mu.Lock()
		if term.t != nil {
			if ended := term.t.ended; !ended.IsZero() && ended.Before(end) {
				end = ended
			}
		}
		l.mu.Unlock()
		lg.mu.Lock()
		rec.end = end
		lg.mu.Unlock()
		lg.notify()
	}
}

// observeClientGo wraps OnStartedLeading to record when client-go's own
// context, the one it passes, ends.
func (lg *ledger) observeClientGo(who string, lead func(context.Context)) func(context.Context) {
	return func(ctx context.Context) {
		lg.wg.Add(1)
		defer lg.wg.Done()
		var rec *led
		defer func() {
			// client-go's context outlives the callback when the term
			// ended first; record when it ends.
			lg.wg.Add(1)
			context.AfterFunc(ctx, func() {
				defer lg.wg.Done()
				now := time.Now()
				lg.mu.Lock()
				defer lg.mu.Unlock()
				if rec != nil {
					rec.clientGoEnd = now
				}
			})
		}()
		lead(ctx)
		lg.mu.Lock()
		rec = lg.terms[len(lg.terms)-1]
		for i := len(lg.terms) - 1; i >= 0; i-- {
			if lg.terms[i].who == who {
				rec = lg.terms[i]
				break
			}
		}
		lg.mu.Unlock()
	}
}

// current returns the term in progress, if any.
func (lg *ledger) current() *led {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	for _, r := range lg.terms {
		if r.end.IsZero() {
			return r
		}
	}
	return nil
}

// waitFor waits until cond holds on the ledger.
func (lg *ledger) waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	kubetest.WaitFor(t, lg.change, within, what, cond)
}

// overlaps returns the pairs of consecutive terms (by start) where one
// began before the previous one's end (as given by end), and the pairs
// whose tokens do not increase.
func overlaps(terms []*led, end func(*led) time.Time) []string {
	sorted := append([]*led(nil), terms...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].term.Started().Before(sorted[j].term.Started()) })
	var bad []string
	for i := 1; i < len(sorted); i++ {
		prev, next := sorted[i-1], sorted[i]
		if e := end(prev); !e.Before(next.term.Started()) {
			bad = append(bad, fmt.Sprintf("%s's term %v ended %v after %s's term %v started",
				prev.who, prev.term.Token(), e.Sub(next.term.Started()).Round(time.Millisecond), next.who, next.term.Token()))
		}
		if next.term.Token() <= prev.term.Token() {
			bad = append(bad, fmt.Sprintf("token %v after %v", next.term.Token(), prev.term.Token()))
		}
	}
	return bad
}

// contender is one candidate: client-go's LeaderElector on a Lock, run
// again each time it returns, reaching etcd through its own proxy.
type contender struct {
	who   string
	tm    timings
	lock  *Lock
	gate  *kubetest.Gate // between the elector and the lock
	proxy proxy.Server
	// stop stops the elector (client-go releases: ReleaseOnCancel).
	stop func()
	// viaConfig: the elector's configuration comes from ElectionConfig.
	viaConfig bool
}

func startContender(t testing.TB, lg *ledger, who string, member int, tm timings) *contender {
	t.Helper()
	return startContenderWith(t, lg, who, member, tm, false)
}

// startContenderWith is startContender, with the elector configured by
// ElectionConfig if viaConfig.
func startContenderWith(t testing.TB, lg *ledger, who string, member int, tm timings, viaConfig bool) *contender {
	t.Helper()
	p, url := etcdtest.Proxy(t, cluster.Endpoints()[member])
	// DialKeepAliveTime, as the package recommends: a connection that a
	// partition left dead is replaced.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 5 * time.Second,
		DialKeepAliveTime: time.Second, DialKeepAliveTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	l, err := New(cli, "ctl", who, tm.elector(), lock.WithPrefix(prefix(t)), lock.WithTTL(tm.ttl),
		lock.WithLogger(zaptest.NewLogger(t, zaptest.Level(zapcore.WarnLevel)).Named(who)), lock.WithCleanupTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	c := &contender{who: who, tm: tm, lock: l, gate: kubetest.NewGate(l), proxy: p, viaConfig: viaConfig}
	c.start(t, lg)
	t.Cleanup(func() {
		c.heal()
		c.stop()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = l.Close(ctx)
	})
	return c
}

func (c *contender) start(t testing.TB, lg *ledger) {
	if c.viaConfig {
		// ElectionConfig, with a plain callback that finds its term in
		// its context; the harness then puts its gate in front of the
		// lock and watches client-go's own context.
		lead := lg.lead(c.who, c.lock)
		cfg, err := ElectionConfig(c.lock, leaderelection.LeaderElectionConfig{
			ReleaseOnCancel: true,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					term, _ := TermFrom(ctx)
					lead(ctx, term)
				},
				OnStoppedLeading: func() {},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Lock = c.gate
		cfg.Callbacks.OnStartedLeading = lg.observeClientGo(c.who, cfg.Callbacks.OnStartedLeading)
		c.stop = runElector(t, cfg)
		return
	}
	c.stop = runElector(t, leaderelection.LeaderElectionConfig{
		Lock:            c.gate,
		LeaseDuration:   c.tm.leaseDuration,
		RenewDeadline:   c.tm.renewDeadline,
		RetryPeriod:     c.tm.retryPeriod,
		ReleaseOnCancel: true,
		Name:            "ctl",
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: lg.onStartedLeading(c.who, c.lock),
			OnStoppedLeading: func() {},
		},
	})
}

// runElector runs client-go's LeaderElector with cfg, again each time Run
// returns, until the returned stop is called; stop cancels the elector's
// context (with ReleaseOnCancel, client-go releases) and waits for it.
func runElector(t testing.TB, cfg leaderelection.LeaderElectionConfig) (stop func()) {
	t.Helper()
	le, err := leaderelection.NewLeaderElector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			le.Run(ctx)
		}
	}()
	return func() { cancel(); <-done }
}

// partition cuts the contender off from etcd; crash does that and freezes
// its elector too, as a stopped process: neither renews nor revokes.
func (c *contender) partition() {
	c.proxy.BlackholeTx()
	c.proxy.BlackholeRx()
}

func (c *contender) crash() {
	c.gate.Cut()
	c.partition()
}

func (c *contender) heal() {
	c.proxy.UnblackholeTx()
	c.proxy.UnblackholeRx()
	c.gate.Heal()
}

// failover waits for a leader, applies fault to it — "release" (its
// elector's context is canceled, ReleaseOnCancel), "crash", "partition",
// or "sustained-partition", a partition that lasts until client-go's own
// OnStartedLeading context has ended — and returns how long until the
// next term started, with both terms. The faulty contender is healed
// (restarted after a release) before it returns.
func failover(t testing.TB, lg *ledger, cands map[string]*contender, fault string) (took time.Duration, from, to *led) {
	t.Helper()
	wait := 3 * testTimings.leaseDuration
	for _, c := range cands {
		wait = 3 * c.tm.leaseDuration
	}
	lg.waitFor(t, wait, "leader", func() bool { from = lg.current(); return from != nil })
	c := cands[from.who]
	at := time.Now()
	switch fault {
	case "release":
		c.stop()
	case "crash":
		c.crash()
	case "partition", "sustained-partition":
		c.partition()
	default:
		t.Fatalf("unknown fault %q", fault)
	}
	lg.waitFor(t, wait, "next leader", func() bool {
		to = lg.current()
		return to != nil && to.term.Token() > from.term.Token()
	})
	if fault == "sustained-partition" {
		lg.waitFor(t, wait, "the end of client-go's context", func() bool {
			lg.mu.Lock()
			defer lg.mu.Unlock()
			return !from.clientGoEnd.IsZero()
		})
	}
	c.heal()
	if fault == "release" {
		c.start(t, lg)
	}
	return to.term.Started().Sub(at), from, to
}

// Three candidates run client-go's own LeaderElector on the lock, on the
// 3-member cluster; the leader is released, crashed and partitioned in
// turn. No two callback contexts overlap, tokens rise per term, and after
// a crash or a partition the next leader starts within about the etcd
// lease TTL — well before client-go's LeaseDuration.
func TestLeaderElectorOneLeaderThroughFaults(t *testing.T) {
	t.Parallel()
	lg := newLedger()
	cands := map[string]*contender{}
	for i, who := range []string{"c0", "c1", "c2"} {
		cands[who] = startContender(t, lg, who, i, testTimings)
	}
	for round := range 2 {
		for _, fault := range []string{"release", "crash", "partition"} {
			took, from, to := failover(t, lg, cands, fault)
			t.Logf("round %d: %s of %s → %s leads after %v (token %v → %v)", round, fault, from.who, to.who,
				took.Round(time.Millisecond), from.term.Token(), to.term.Token())
			if fault != "release" && took >= testTimings.leaseDuration {
				t.Errorf("%s: next leader after %v, not before client-go's LeaseDuration %v", fault, took, testTimings.leaseDuration)
			}
		}
	}
	for _, c := range cands {
		c.stop()
	}
	lg.wg.Wait()

	lg.mu.Lock()
	defer lg.mu.Unlock()
	if len(lg.terms) < 7 {
		t.Errorf("%d terms, want at least 7", len(lg.terms))
	}
	for _, bad := range overlaps(lg.terms, func(r *led) time.Time { return r.end }) {
		t.Error(bad)
	}
	// The negative control: client-go's own contexts, which end only after
	// RenewDeadline of failed renewals, do overlap the next term after a
	// crash or a partition — the checker sees it.
	clientGo := overlaps(lg.terms, func(r *led) time.Time { return r.clientGoEnd })
	if len(clientGo) == 0 {
		t.Error("client-go's own contexts never overlapped a later term: the overlap check cannot fail")
	}
	for _, o := range clientGo {
		t.Logf("client-go's context alone: %s", o)
	}
}
