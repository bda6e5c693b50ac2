package election_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/clock/clocktest"
	"github.com/etcdlock/etcdlock/pkg/election"
	"github.com/etcdlock/etcdlock/pkg/embedded"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/holders"
	"github.com/etcdlock/etcdlock/pkg/lock"
	"github.com/etcdlock/etcdlock/pkg/lock/lockmetrics"
)

// cluster is a 3-member etcd with fast raft settings, shared by the tests.
var cluster *etcdtest.Shared

func TestMain(m *testing.M) {
	cluster = etcdtest.Start(embedded.WithMembers(3), embedded.WithRaftTiming(50*time.Millisecond, 500*time.Millisecond))
	os.Exit(etcdtest.RunMain(m, func() { cluster.Close() }))
}

// prefix is the key prefix of t's elections: one per test run, so that
// -count=N runs never meet a key an earlier run left behind (a stuck
// leader's key stays until its lease expires).
func prefix(t testing.TB) string {
	prefixes.Lock()
	defer prefixes.Unlock()
	p, ok := prefixes.m[t]
	if !ok {
		prefixes.n++
		p = fmt.Sprintf("/el/%s/%d/", strings.ReplaceAll(t.Name(), "/", "_"), prefixes.n)
		prefixes.m[t] = p
	}
	return p
}

var prefixes = struct {
	sync.Mutex
	n int
	m map[testing.TB]string
}{m: map[testing.TB]string{}}

// candidate runs an Elector until the test ends.
type candidate struct {
	e      *election.Elector
	cli    *clientv3.Client
	cancel context.CancelFunc
	done   chan struct{}
}

// cand is a candidate of the tests: its Config, and the options of its
// sessions that the tests vary.
type cand struct {
	election.Config
	Identity string        // lock.WithOwner
	Prefix   string        // lock.WithPrefix; default: the test's prefix
	TTL      time.Duration // lock.WithTTL; default 2s
	Logger   *zap.Logger   // lock.WithLogger; default: the test's
	Opts     []lock.SessionOption
}

// options are c's session options, with the tests' defaults.
func (c cand) options(t testing.TB) []lock.SessionOption {
	logger := c.Logger
	if logger == nil {
		logger = zaptest.NewLogger(t).Named(c.Identity)
	}
	opts := []lock.SessionOption{lock.WithPrefix(cmp.Or(c.Prefix, prefix(t))), lock.WithTTL(cmp.Or(c.TTL, 2*time.Second)), lock.WithLogger(logger)}
	if c.Identity != "" {
		opts = append(opts, lock.WithOwner(c.Identity))
	}
	return append(opts, c.Opts...)
}

// start runs a candidate for the election "ctl" under c.Prefix (default:
// the test's prefix).
func start(t testing.TB, cd cand) *candidate {
	t.Helper()
	cfg := cd.Config
	if cfg.Client == nil {
		cfg.Client = etcdtest.Client(t, cluster.Endpoints()...)
	}
	cfg.Name = "ctl"
	e, err := election.New(cfg, cd.options(t)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &candidate{e: e, cli: cfg.Client, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		if err := e.Run(ctx); err != nil {
			t.Error(err)
		}
	}()
	t.Cleanup(c.stop)
	return c
}

func (c *candidate) stop() {
	c.cancel()
	<-c.done
}

// waitQueued waits until n candidates of the election "ctl" under pfx wait
// behind its leader.
func waitQueued(t testing.TB, cli *clientv3.Client, pfx string, n int) {
	t.Helper()
	etcdtest.Eventually(t, 10*time.Second, func() bool {
		st, err := holders.Inspect(context.Background(), cli, pfx, "ctl")
		return err == nil && len(st.Waiters) == n
	}, fmt.Sprintf("%d candidates never queued", n))
}

// offer sends v on ch unless ch is full: a callback that runs once more
// than a test expects (a term lost and led again under load) must not
// block the elector, and with it the test's clean-up.
func offer[T any](ch chan<- T, v T) {
	select {
	case ch <- v:
	default:
	}
}

// receive returns the next value sent on ch, failing t if ch is closed or
// nothing comes within timeout.
func receive[T any](t testing.TB, ch <-chan T, timeout time.Duration, what string) T {
	t.Helper()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatalf("channel closed before %s", what)
		}
		return v
	case <-time.After(timeout):
		t.Fatalf("no %s within %v", what, timeout)
	}
	panic("not reached")
}

type interval struct {
	who        string
	token      fencing.Token
	start, end time.Time
}

// Exactly one leader at any instant: every term's ACTIVE interval, on this
// host's monotonic clock, ends before the next one starts, and tokens rise.
func TestOneLeaderAtATimeOverManyTerms(t *testing.T) {
	t.Parallel()
	const terms = 30
	var (
		mu        sync.Mutex
		intervals []interval
		enough    = make(chan struct{}, 1)
		once      sync.Once
	)
	for _, id := range []string{"a", "b", "c"} {
		start(t, cand{Identity: id, Config: election.Config{ReleaseOnCancel: true, Callbacks: election.Callbacks{
			OnStartedLeading: func(ctx context.Context, term election.Term) {
				iv := interval{who: id, token: term.Token, start: time.Now()}
				select { // work for a while, then hand over by returning
				case <-ctx.Done():
				case <-time.After(time.Duration(10+rand.IntN(40)) * time.Millisecond):
				}
				iv.end = time.Now()
				mu.Lock()
				intervals = append(intervals, iv)
				if len(intervals) == terms {
					once.Do(func() { enough <- struct{}{} })
				}
				mu.Unlock()
			},
		}}})
	}
	receive(t, enough, 60*time.Second, "30th term")
	mu.Lock()
	defer mu.Unlock()
	sort.Slice(intervals, func(i, j int) bool { return intervals[i].start.Before(intervals[j].start) })
	leaders := map[string]int{}
	for i, iv := range intervals {
		leaders[iv.who]++
		if i == 0 {
			continue
		}
		prev := intervals[i-1]
		if iv.start.Before(prev.end) {
			t.Errorf("term %d (%s, token %v) started %v before term %d (%s) ended", i, iv.who, iv.token, prev.end.Sub(iv.start), i-1, prev.who)
		}
		if iv.token <= prev.token {
			t.Errorf("term %d token %v not above %v", i, iv.token, prev.token)
		}
	}
	if len(leaders) != 3 {
		t.Errorf("leaders %v: want all three candidates to lead in turn (FIFO)", leaders)
	}
}

func TestGracefulHandoffAndObservers(t *testing.T) {
	t.Parallel()
	started := make(chan string, 10)
	var stoppedA int
	var mu sync.Mutex
	seen := map[string][]string{}
	mk := func(id string, onStop func()) cand {
		return cand{Identity: id, Config: election.Config{ReleaseOnCancel: true, Callbacks: election.Callbacks{
			OnStartedLeading: func(ctx context.Context, _ election.Term) { started <- id; <-ctx.Done() },
			OnStoppedLeading: onStop,
			OnNewLeader: func(leader string) {
				mu.Lock()
				seen[id] = append(seen[id], leader)
				mu.Unlock()
			},
		}}}
	}
	a := start(t, mk("a", func() { mu.Lock(); stoppedA++; mu.Unlock() }))
	if got := receive(t, started, 10*time.Second, "first term"); got != "a" {
		t.Fatalf("first leader %s", got)
	}
	b := start(t, mk("b", nil))
	waitQueued(t, b.cli, prefix(t), 1)
	etcdtest.Eventually(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen["b"]) > 0
	}, "b never observed a leader")
	resigned := time.Now()
	if err := a.e.Resign(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, started, 10*time.Second, "handoff after resign"); got != "b" {
		t.Fatalf("after resign, %s leads; want b (FIFO)", got)
	}
	t.Logf("graceful handoff: %v from resign to the next leader's OnStartedLeading", time.Since(resigned))
	if !b.e.IsLeader() || a.e.IsLeader() {
		t.Errorf("IsLeader: a %v b %v", a.e.IsLeader(), b.e.IsLeader())
	}
	l, err := election.GetLeader(context.Background(), b.cli, prefix(t), "ctl")
	if err != nil || l.Identity != "b" {
		t.Errorf("GetLeader = %+v %v", l, err)
	}
	etcdtest.Eventually(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		s := seen["a"]
		return stoppedA == 1 && len(s) >= 2 && s[0] == "a" && s[len(s)-1] == "b"
	}, "a did not see a then b as leader, or OnStoppedLeading did not run once")
}

// A leader whose process dies (its client connection closes, no resign) is
// replaced once etcd expires its lease and its tenure key: the next
// leader starts after the old one's context ended, and finds the old
// term's keys gone (BenchmarkFailover measures how long it takes). The
// TTL is one a loaded machine renews in time: with 2 s, b's own session
// could be lost while it waits and its wait start over.
func TestCrashHandoff(t *testing.T) {
	t.Parallel()
	const ttl = 5 * time.Second
	startedA := make(chan election.Term, 1)
	aTerm := make(chan context.Context, 1)
	type started struct {
		aEnded bool     // a's term's context had ended
		keys   []string // the election's keys as b started
		err    error
	}
	startedB := make(chan started, 1)
	aCli := etcdtest.Client(t, cluster.Endpoints()...)
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	start(t, cand{Identity: "a", TTL: ttl, Config: election.Config{Client: aCli, Callbacks: election.Callbacks{
		OnStartedLeading: func(ctx context.Context, term election.Term) {
			offer(startedA, term)
			offer(aTerm, ctx)
			<-ctx.Done()
		},
	}}})
	// a leads once its callback runs, not once its key is first: a crash
	// between the two would leave no context to end.
	a := receive(t, startedA, 30*time.Second, "a's OnStartedLeading")
	start(t, cand{Identity: "b", TTL: ttl, Config: election.Config{Callbacks: election.Callbacks{
		OnStartedLeading: func(ctx context.Context, _ election.Term) {
			s := started{aEnded: (<-aTerm).Err() != nil}
			var get *clientv3.GetResponse
			if get, s.err = cli.Get(ctx, prefix(t), clientv3.WithPrefix(), clientv3.WithKeysOnly()); s.err == nil {
				for _, kv := range get.Kvs {
					s.keys = append(s.keys, string(kv.Key))
				}
			}
			offer(startedB, s)
			<-ctx.Done()
		},
	}}})
	waitQueued(t, aCli, prefix(t), 1)
	get, err := cli.Get(context.Background(), prefix(t)+"ctl%tenure/", clientv3.WithPrefix())
	if err != nil || len(get.Kvs) != 1 {
		t.Fatalf("tenure keys %v (%v), want a's", get.Kvs, err)
	}
	tenure := string(get.Kvs[0].Key)
	aCli.Close()
	b := receive(t, startedB, 10*ttl, "takeover by b")
	if b.err != nil {
		t.Fatalf("reading the election's keys as b started: %v", b.err)
	}
	if !b.aEnded {
		t.Errorf("b started before a's term's context ended")
	}
	for _, k := range []string{a.Key, tenure} {
		if slices.Contains(b.keys, k) {
			t.Errorf("b started while a's key %s was there (keys: %v)", k, b.keys)
		}
	}
}

// An operator revokes the leader's lease: its context is canceled, its
// OnStoppedLeading runs, the loss is reported to Metrics as a revoke, and
// it campaigns again.
func TestRevokedLeaseEndsTerm(t *testing.T) {
	t.Parallel()
	m := &recorder{}
	var (
		mu                 sync.Mutex
		active, maxActive  int
		startedN, stoppedN int
		terms              = make(chan election.Term, 10)
	)
	// A 5 s TTL: a loaded machine hears of each revoke before the
	// session's deadline, as the loss reason asserted needs.
	c := start(t, cand{Identity: "a", TTL: 5 * time.Second, Config: election.Config{Metrics: m, Callbacks: election.Callbacks{
		OnStartedLeading: func(ctx context.Context, term election.Term) {
			mu.Lock()
			active++
			startedN++
			maxActive = max(maxActive, active)
			mu.Unlock()
			terms <- term
			<-ctx.Done()
			time.Sleep(100 * time.Millisecond) // slow to stop: the next term must wait
			mu.Lock()
			active--
			mu.Unlock()
		},
		OnStoppedLeading: func() { mu.Lock(); stoppedN++; mu.Unlock() },
	}}})
	for range 3 {
		term := receive(t, terms, 10*time.Second, "term")
		if !m.leading.Load() {
			t.Errorf("Metrics not told of the term while leading")
		}
		st, err := holders.Inspect(context.Background(), c.cli, prefix(t), "ctl")
		if err != nil || st.Holder == nil || st.Holder.Token != term.Token {
			t.Fatalf("holder %+v, want term %v", st.Holder, term.Token)
		}
		if _, err := c.cli.Revoke(context.Background(), st.Holder.LeaseID); err != nil {
			t.Fatal(err)
		}
	}
	receive(t, terms, 10*time.Second, "fourth term")
	etcdtest.Eventually(t, 10*time.Second, func() bool { return m.renewals.Load() > 0 }, "Metrics never told of a lease renewal")
	mu.Lock()
	defer mu.Unlock()
	if maxActive != 1 {
		t.Errorf("%d terms' callbacks ran at once", maxActive)
	}
	if stoppedN != 3 || startedN != 4 {
		t.Errorf("started %d stopped %d, want 4 and 3", startedN, stoppedN)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started.Load() != 4 || len(m.stopped) != 3 {
		t.Errorf("Metrics: %d terms started, %d stopped; want 4 and 3", m.started.Load(), len(m.stopped))
	}
	for i, err := range m.stopped {
		if !errors.Is(err, lock.ErrLost) || !errors.Is(err, lock.ErrLeaseRevoked) || lockmetrics.LossReason(err) != "lease_revoked" {
			t.Errorf("Metrics: term %d stopped with %v (reason %q), want a loss to a revoke", i+1, err, lockmetrics.LossReason(err))
		}
	}
}

// recorder is an election.Metrics that keeps what it is told.
type recorder struct {
	leading           atomic.Bool
	started, renewals atomic.Int64 // renewals: successful ones

	mu      sync.Mutex
	stopped []error // each term's lost argument

	onStop chan error // if not nil, receives each term's lost argument too
}

func (r *recorder) StartedLeading() {
	r.leading.Store(true)
	r.started.Add(1)
}

func (r *recorder) StoppedLeading(lost error) {
	r.leading.Store(false)
	r.mu.Lock()
	r.stopped = append(r.stopped, lost)
	r.mu.Unlock()
	if r.onStop != nil {
		r.onStop <- lost
	}
}

func (r *recorder) LeaseRenewed(_ time.Duration, err error) {
	if err == nil {
		r.renewals.Add(1)
	}
}

// The health check fails while a leader keeps working past its deadline.
func TestHealthCheckFailsForStuckLeader(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	leading := make(chan context.Context, 1)
	p, url := etcdtest.Proxy(t, cluster.Endpoints()[0])
	pcli := etcdtest.Client(t, url)
	c := start(t, cand{Identity: "stuck", Config: election.Config{Client: pcli, Callbacks: election.Callbacks{
		OnStartedLeading: func(ctx context.Context, _ election.Term) {
			leading <- ctx
			<-release // ignores ctx: a stuck controller
		},
	}}})
	defer close(release)
	defer func() { p.UnblackholeTx(); p.UnblackholeRx() }()
	termCtx := <-leading
	rec := httptest.NewRecorder()
	c.e.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	if rec.Code != 200 || c.e.Check(nil) != nil {
		t.Fatalf("healthy leader: %d %v", rec.Code, c.e.Check(nil))
	}
	p.BlackholeTx()
	p.BlackholeRx()
	etcdtest.Eventually(t, 10*time.Second, func() bool { return c.e.Check(nil) != nil }, "health check never failed for a stuck leader")
	// Once its term's context has ended (at the deadline the check has
	// just seen pass, by the session's own timer), whatever its callback
	// does, it no longer leads, though the next leader may already.
	select {
	case <-termCtx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the term's context did not end at its deadline")
	}
	if c.e.IsLeader() || c.e.Term() != nil {
		t.Errorf("a stuck leader past its deadline: IsLeader %v, Term %v", c.e.IsLeader(), c.e.Term())
	}
	rec = httptest.NewRecorder()
	c.e.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	if rec.Code != 503 {
		t.Errorf("stuck leader: HTTP %d", rec.Code)
	}
}

// Check reads the term's deadline on the session's clock (here a fake one
// set long ago, given with lock.WithClock), not on the real clock, which is
// decades past that deadline.
func TestHealthCheckUsesTheSessionClock(t *testing.T) {
	t.Parallel()
	fc := clocktest.NewFake(time.Unix(2_000_000, 0))
	release := make(chan struct{})
	leading := make(chan struct{}, 1)
	p, url := etcdtest.Proxy(t, cluster.Endpoints()[0])
	c := start(t, cand{Identity: "faked", TTL: 10 * time.Second,
		Opts: []lock.SessionOption{lock.WithClock(fc)}, Config: election.Config{Client: etcdtest.Client(t, url),
			Callbacks: election.Callbacks{OnStartedLeading: func(ctx context.Context, _ election.Term) {
				leading <- struct{}{}
				<-release // ignores ctx: a stuck controller
			}}}})
	defer close(release)
	defer func() { p.UnblackholeTx(); p.UnblackholeRx() }()
	select {
	case <-leading:
	case <-time.After(10 * time.Second):
		t.Fatal("never led")
	}
	if err := c.e.Check(nil); err != nil {
		t.Errorf("Check before the deadline on the session's clock = %v", err)
	}
	// No renewal gets through: moving the fake clock past the deadline
	// makes the stuck leader late.
	p.BlackholeTx()
	p.BlackholeRx()
	fc.Step(10 * time.Second)
	etcdtest.Eventually(t, 10*time.Second, func() bool { return c.e.Check(nil) != nil },
		"Check passed for a leader past its deadline on the session's clock")
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	ok := election.Callbacks{OnStartedLeading: func(context.Context, election.Term) {}}
	valid := election.Config{Client: cli, Name: "x", Callbacks: ok}
	for name, tc := range map[string]struct {
		cfg  election.Config
		opts []lock.SessionOption
	}{
		"no client":   {cfg: election.Config{Name: "x", Callbacks: ok}},
		"no name":     {cfg: election.Config{Client: cli, Callbacks: ok}},
		"bad name":    {cfg: election.Config{Client: cli, Name: "a\x00b", Callbacks: ok}},
		"no callback": {cfg: election.Config{Client: cli, Name: "x"}},
		"short ttl":   {valid, []lock.SessionOption{lock.WithTTL(time.Millisecond)}},
		"retry order": {cfg: election.Config{Client: cli, Name: "x", RetryMin: time.Second, RetryMax: time.Millisecond, Callbacks: ok}},
		// Run used to log and retry these forever.
		"prefix without slash": {valid, []lock.SessionOption{lock.WithPrefix("/el")}},
		"bad session option":   {valid, []lock.SessionOption{lock.WithSafetyMargin(-time.Second)}},
		"nil session option":   {valid, []lock.SessionOption{nil}},
		"TTL above etcd's":     {valid, []lock.SessionOption{lock.WithTTL(9_000_000_001 * time.Second)}},
		"margin not below TTL": {valid, []lock.SessionOption{lock.WithTTL(2 * time.Second), lock.WithSafetyMargin(2 * time.Second)}},
		"WithLockDelay":        {valid, []lock.SessionOption{lock.WithLockDelay(time.Second)}},
		"WithMetrics and Metrics": {election.Config{Client: cli, Name: "x", Callbacks: ok, Metrics: &recorder{}},
			[]lock.SessionOption{lock.WithMetrics(nopLockMetrics{})}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := election.New(tc.cfg, tc.opts...); !errors.Is(err, election.ErrInvalidConfig) {
				t.Errorf("New = %v, want ErrInvalidConfig", err)
			}
		})
	}
	e, err := election.New(valid)
	if err != nil || e.Identity() == "" {
		t.Fatalf("defaults: %v", err)
	}
	if e, err := election.New(valid, lock.WithOwner("me")); err != nil || e.Identity() != "me" {
		t.Errorf("WithOwner: identity %q, %v; want me", e.Identity(), err)
	}
	// Without Metrics, the session's metrics are the caller's to set.
	if _, err := election.New(valid, lock.WithMetrics(nopLockMetrics{})); err != nil {
		t.Errorf("WithMetrics without Metrics: %v", err)
	}
}

// nopLockMetrics is a lock.Metrics that records nothing.
type nopLockMetrics struct{}

func (nopLockMetrics) Waiting(int)                       {}
func (nopLockMetrics) Acquired(time.Duration)            {}
func (nopLockMetrics) Ended(time.Duration, error)        {}
func (nopLockMetrics) LeaseRenewed(time.Duration, error) {}

// Without ReleaseOnCancel, stopping the leader leaves its key until the
// lease expires; with it, the key is gone once Run returns, and a follower
// takes over.
func TestReleaseOnCancel(t *testing.T) {
	t.Parallel()
	for _, release := range []bool{true, false} {
		t.Run(map[bool]string{true: "release", false: "keep"}[release], func(t *testing.T) {
			startedB := make(chan struct{}, 1)
			// A TTL a loaded machine does not outlast between a's last
			// renewal and the read of its key after Run returned.
			a := start(t, cand{Identity: "a", TTL: 5 * time.Second, Config: election.Config{ReleaseOnCancel: release, Callbacks: election.Callbacks{
				OnStartedLeading: func(ctx context.Context, _ election.Term) { <-ctx.Done() },
			}}})
			etcdtest.Eventually(t, 10*time.Second, a.e.IsLeader, "a never led")
			key := a.e.Term().Key
			start(t, cand{Identity: "b", Config: election.Config{Callbacks: election.Callbacks{
				OnStartedLeading: func(ctx context.Context, _ election.Term) { offer(startedB, struct{}{}); <-ctx.Done() },
			}}})
			waitQueued(t, a.cli, prefix(t), 1)
			a.stop()
			get, err := a.cli.Get(context.Background(), key)
			if err != nil {
				t.Fatal(err)
			}
			if release && len(get.Kvs) != 0 {
				t.Errorf("a's key %s left after Run returned with ReleaseOnCancel", key)
			}
			if !release && len(get.Kvs) != 1 {
				t.Errorf("a's key %s gone at once although a kept its lease", key)
			}
			receive(t, startedB, 30*time.Second, "takeover by b")
		})
	}
}

// A Resign that fails (its context already ended) still ends the term, and
// the elector campaigns again on the same session. The next term must get a
// new, larger token: the failed resign left the old key in etcd, and a term
// that inherited it would share its token with the term before.
func TestFailedResignNextTermGetsNewToken(t *testing.T) {
	t.Parallel()
	tokens := make(chan fencing.Token, 10)
	a := start(t, cand{Identity: "a", Config: election.Config{ReleaseOnCancel: true, Callbacks: election.Callbacks{
		OnStartedLeading: func(ctx context.Context, term election.Term) { tokens <- term.Token; <-ctx.Done() },
	}}})
	next := func() fencing.Token {
		t.Helper()
		return receive(t, tokens, 10*time.Second, "term")
	}
	prev := next()
	for i := range 3 {
		ended, cancel := context.WithCancel(context.Background())
		cancel()
		if err := a.e.Resign(ended); !errors.Is(err, context.Canceled) {
			t.Fatalf("Resign(canceled) = %v, want context.Canceled", err)
		}
		tok := next()
		if tok <= prev {
			t.Fatalf("term %d after a failed resign has token %v, want above the previous term's %v", i+2, tok, prev)
		}
		prev = tok
	}
}
