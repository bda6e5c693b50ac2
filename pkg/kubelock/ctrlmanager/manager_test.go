package ctrlmanager_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/pkg/v3/proxy"
	"go.uber.org/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/kubelock"
	"github.com/etcdlock/etcdlock/pkg/kubelock/ctrlmanager"
	"github.com/etcdlock/etcdlock/pkg/kubelock/internal/kubetest"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// short are the durations of the quick runs: a term renewed every 300 ms
// with a 2 s TTL.
var short = setup{ttl: 2 * time.Second, timings: kubelock.Timings{
	LeaseDuration: 1500 * time.Millisecond, RenewDeadline: time.Second, RetryPeriod: 300 * time.Millisecond}}

// defaults are client-go's and controller-runtime's durations with the
// lock's DefaultTTL.
var defaults = setup{ttl: kubelock.DefaultTTL, timings: kubelock.DefaultTimings}

// setup is how the managers are configured.
type setup struct {
	ttl     time.Duration
	timings kubelock.Timings
	// plain: the manager options are set by hand (LeaderElection, the
	// lock, the durations), as before package ctrlmanager.
	plain bool
	// reuse: each candidate gives one Options value, and its lock, to
	// every manager it makes.
	reuse bool
}

// etcdCandidate is a candidate on the etcd lock, reaching etcd through
// its own proxy.
type etcdCandidate struct {
	*candidate
	proxy  proxy.Server
	mu     sync.Mutex
	cli    *clientv3.Client // the current incarnation's
	lk     *kubelock.Lock   // the current incarnation's
	closed bool             // cli was closed by the fault "close"
}

func newEtcdCandidate(t testing.TB, who string, member int, s setup, release bool) *etcdCandidate {
	p, url := etcdtest.Proxy(t, cluster.Endpoints()[member])
	c := &etcdCandidate{proxy: p}
	pfx := "/ctrlmanager/" + strings.ReplaceAll(t.Name(), "/", "_") + "/"
	build := func() (incarnation, error) {
		// DialKeepAliveTime, as the package recommends: a connection that
		// a partition left dead is replaced.
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 5 * time.Second,
			DialKeepAliveTime: time.Second, DialKeepAliveTimeout: time.Second, Logger: zap.NewNop()})
		if err != nil {
			return incarnation{}, err
		}
		lk, err := kubelock.New(cli, "ctl", who, s.timings, lock.WithPrefix(pfx), lock.WithTTL(s.ttl),
			lock.WithCleanupTimeout(time.Second))
		if err != nil {
			cli.Close()
			return incarnation{}, err
		}
		closeAll := func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = lk.Close(ctx)
			cli.Close()
		}
		opts := manager.Options{LeaderElection: true, LeaderElectionReleaseOnCancel: release}
		if s.plain {
			opts.LeaderElectionResourceLockInterface = lk
			opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = &s.timings.LeaseDuration, &s.timings.RenewDeadline, &s.timings.RetryPeriod
		} else if opts, err = ctrlmanager.Options(lk, opts); err != nil {
			closeAll()
			return incarnation{}, err
		}
		c.mu.Lock()
		c.cli, c.lk, c.closed = cli, lk, false
		c.mu.Unlock()
		return incarnation{opts: opts, close: closeAll}, nil
	}
	c.candidate = &candidate{who: who, start: build, token: c.token}
	if s.reuse {
		// One lock and one Options value for every manager, as a main
		// loop that makes a new manager after "leader election lost"
		// does; made anew only when the fault closed the etcd client.
		var cur incarnation
		c.candidate.start = func() (incarnation, error) {
			c.mu.Lock()
			stale := cur.close == nil || c.closed
			c.mu.Unlock()
			if stale {
				if cur.close != nil {
					cur.close()
				}
				var err error
				if cur, err = build(); err != nil {
					return incarnation{}, err
				}
			}
			return incarnation{opts: cur.opts, close: func() {}}, nil
		}
		t.Cleanup(func() {
			if cur.close != nil {
				cur.close()
			}
		})
	}
	return c
}

// token returns the fencing token of the current lock's latest term.
func (c *etcdCandidate) token() int64 {
	c.mu.Lock()
	lk := c.lk
	c.mu.Unlock()
	if lk == nil {
		return 0
	}
	term, err := lk.Term()
	if err != nil {
		return 0
	}
	return int64(term.Token())
}

// settle waits, within a bound, until the candidate's manager is not one
// whose term has ended while its elector still leads: such a manager
// stops on its own once the elector gives up, RenewDeadline later, and
// stopping it meanwhile runs into controller-runtime's data race between
// a stop and a lost election (README, "controller-runtime and -race").
func (c *etcdCandidate) settle(within time.Duration) {
	for end := time.Now().Add(within); c.losing() && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
}

// losing reports whether the current manager's term has ended while the
// manager still runs.
func (c *etcdCandidate) losing() bool {
	c.mu.Lock()
	lk := c.lk
	c.mu.Unlock()
	c.candidate.mu.Lock()
	since, running := c.candidate.since, c.candidate.running
	c.candidate.mu.Unlock()
	if lk == nil || !running {
		return false
	}
	term, err := lk.Term()
	return err == nil && term.Context().Err() != nil && !term.Started().Before(since)
}

func (c *etcdCandidate) closeClient() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	c.cli.Close()
}

// fault is applied to the current leader, who.
type fault func(who string) outcome

// outcome is what drive needs of an applied fault.
type outcome struct {
	// heal, if not nil, ends the fault; drive runs it once the faulty
	// leader's work has ended, or once it kept its term.
	heal func()
	// kept, if not nil, reports that the leader kept its term through the
	// fault (client-go's Lease lock recreates a deleted Lease): there is
	// no failover to wait for.
	kept func() bool
	// elections, if not nil, counts the etcd leader elections since the
	// fault: each refreshes every etcd lease to a full TTL (etcd's lessor
	// Promote), the faulty leader's too.
	elections func() int64
	// slow, if not nil, describes the candidates; drive logs it once when
	// no next leader worked within a quarter of its bound.
	slow func() string
}

// randomFaults picks a fault at random from names.
func randomFaults(rnd *rand.Rand, names ...string) func() string {
	return func() string { return names[rnd.Intn(len(names))] }
}

// inTurn applies the faults names one after another.
func inTurn(names ...string) func() string {
	i := -1
	return func() string { i++; return names[i%len(names)] }
}

// drive applies the faults that pick names, from faults, to the leader
// until terms runs have started, and returns what each did. A fault lasts
// until the faulty leader's work has ended, as a sustained partition does.
func drive(t testing.TB, log *workLog, pick func() string, terms int, within time.Duration, faults map[string]fault) failovers {
	t.Helper()
	took := failovers{}
	for {
		var n int
		var cur string
		log.waitFor(t, within, "leader", func() bool { n, cur = log.started(); return cur != "" })
		if n >= terms {
			return took
		}
		name := pick()
		run := log.current()
		at := time.Now()
		out := faults[name](cur)
		var next time.Time
		kept, described := false, false
		log.waitFor(t, within, "next leader after "+name+" of "+cur, func() bool {
			if out.slow != nil && !described && time.Since(at) > within/4 {
				described = true
				t.Logf("%s of %s: no next leader after %v: %s", name, cur, time.Since(at).Round(time.Millisecond), out.slow())
			}
			if out.kept != nil && out.kept() {
				kept = true
				return true
			}
			log.mu.Lock()
			defer log.mu.Unlock()
			if len(log.runs) > n {
				next = log.runs[n].first
				return true
			}
			return false
		})
		stats := took.stats(name)
		if kept {
			stats.kept++
			t.Logf("%s of %s: the leader kept its term", name, cur)
		} else {
			log.waitFor(t, within, "the end of "+cur+"'s run", func() bool {
				log.mu.Lock()
				defer log.mu.Unlock()
				return run.done
			})
			log.mu.Lock()
			last := run.last
			log.mu.Unlock()
			stats.took = append(stats.took, next.Sub(at))
			var elections int64
			if out.elections != nil {
				if elections = out.elections(); elections > 0 {
					stats.elected = append(stats.elected, next.Sub(at))
				}
			}
			stats.after = append(stats.after, last.Sub(at))
			if !last.Before(next) {
				stats.overlaps = append(stats.overlaps, last.Sub(next))
			}
			t.Logf("%s of %s: next leader's first work after %v, %s's last %v after the fault; %d etcd leader elections", name, cur,
				next.Sub(at).Round(time.Millisecond), cur, last.Sub(at).Round(time.Millisecond), elections)
		}
		if out.heal != nil {
			out.heal()
		}
		time.Sleep(time.Duration(rand.Intn(500)) * time.Millisecond) // the leader works a while
	}
}

// etcdFaults are the faults of a leader on the etcd lock: partitioned
// from etcd, its record deleted by hand, its etcd client closed, its
// manager stopped (released or not, as the candidate is configured) and
// its pod gone until the next leader works, crashed (cut off, and gone
// likewise).
func etcdFaults(t testing.TB, cands map[string]*etcdCandidate) map[string]fault {
	direct := etcdtest.Client(t, cluster.Endpoints()...)
	faults := etcdFaultsOn(t, direct, cands)
	for name, f := range faults {
		faults[name] = func(who string) outcome {
			before := raftTerm(t, direct)
			out := f(who)
			out.elections = func() int64 { return raftTerm(t, direct) - before }
			out.slow = func() string { return describe(cands) }
			return out
		}
	}
	return faults
}

// describe says, for each candidate, whether its manager runs or its pod
// is down, the state of its etcd client's connection and its lock's
// latest term.
func describe(cands map[string]*etcdCandidate) string {
	var b strings.Builder
	for _, who := range slices.Sorted(maps.Keys(cands)) {
		c := cands[who]
		c.candidate.mu.Lock()
		running, down := c.candidate.running, c.candidate.held != nil
		c.candidate.mu.Unlock()
		c.mu.Lock()
		cli, lk := c.cli, c.lk
		c.mu.Unlock()
		fmt.Fprintf(&b, "%s: manager running %v, pod down %v", who, running, down)
		if cli != nil {
			fmt.Fprintf(&b, ", connection %v", cli.ActiveConnection().GetState())
		}
		if lk != nil {
			if term, err := lk.Term(); err != nil {
				fmt.Fprintf(&b, ", no term (%v)", err)
			} else if term.Context().Err() != nil {
				fmt.Fprintf(&b, ", term %d ended (%v)", term.Token(), context.Cause(term.Context()))
			} else {
				fmt.Fprintf(&b, ", term %d live", term.Token())
			}
		}
		if m := c.elector.Last(); m != "" {
			fmt.Fprintf(&b, ", elector: %s", m)
		}
		b.WriteString("; ")
	}
	return b.String()
}

// raftTerm returns the etcd cluster's raft term, which each leader
// election increments.
func raftTerm(t testing.TB, cli *clientv3.Client) int64 {
	var term uint64
	for _, ep := range cluster.Endpoints() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := cli.Status(ctx, ep)
		cancel()
		if err != nil {
			t.Logf("etcd status of %s: %v", ep, err)
			continue
		}
		term = max(term, st.RaftTerm)
	}
	return int64(term)
}

func etcdFaultsOn(t testing.TB, direct *clientv3.Client, cands map[string]*etcdCandidate) map[string]fault {
	key := "/ctrlmanager/" + strings.ReplaceAll(t.Name(), "/", "_") + "/ctl"
	return map[string]fault{
		"partition": func(who string) outcome {
			p := cands[who].proxy
			p.BlackholeTx()
			p.BlackholeRx()
			return outcome{heal: func() { p.UnblackholeTx(); p.UnblackholeRx() }}
		},
		"delete": func(string) outcome {
			if _, err := direct.Delete(context.Background(), key); err != nil {
				t.Error(err)
			}
			return outcome{}
		},
		"close": func(who string) outcome { cands[who].closeClient(); return outcome{} },
		// A crash: the process is cut off and its manager gone at once;
		// etcd expires the record.
		"crash": func(who string) outcome {
			p := cands[who].proxy
			p.BlackholeTx()
			p.BlackholeRx()
			cands[who].down()
			return outcome{heal: func() { p.UnblackholeTx(); p.UnblackholeRx(); cands[who].up() }}
		},
		"stop": func(who string) outcome { cands[who].down(); return outcome{heal: cands[who].up} },
	}
}

// runEtcdManagers runs three candidates on the etcd lock with setup s
// (one of them does not release when stopped) and applies the faults pick
// names until terms runs have started; it returns the work log and what
// the faults did.
func runEtcdManagers(t testing.TB, s setup, terms int, pick func() string) (*workLog, failovers) {
	log := newWorkLog()
	cfg := kubetest.NoAPIServer(t)
	cands := map[string]*etcdCandidate{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		for _, c := range cands {
			c.settle(10 * time.Second)
		}
		cancel()
		wg.Wait()
	}()
	for i := range 3 {
		who := fmt.Sprintf("m%d", i)
		cands[who] = newEtcdCandidate(t, who, i, s, i != 2)
		cands[who].run(t, ctx, &wg, cfg, log)
	}
	within := 10 * (s.ttl + s.timings.RetryPeriod + s.timings.RenewDeadline)
	took := drive(t, log, pick, terms, within, etcdFaults(t, cands))
	for _, c := range cands {
		c.proxy.UnblackholeTx()
		c.proxy.UnblackholeRx()
	}
	return log, took
}

// Real controller-runtime managers set up with Options, each running a
// plain leader-only Runnable that works until its context ends; the
// leader is partitioned, its record deleted, its etcd client closed and
// its manager stopped or crashed, at random (seed KUBELOCK_MANAGER_SEED). No
// Runnable works after the next one started, on this process's clock.
// KUBELOCK_MANAGER_TERMS sets how many terms (default 5);
// KUBELOCK_MANAGER_DEFAULTS=1 runs with the default durations;
// KUBELOCK_MANAGER_FAULTS (a comma-separated list, e.g. "partition,crash")
// picks from fewer faults.
func TestManagersNeverOverlap(t *testing.T) {
	t.Parallel()
	managersNeverOverlap(t, short)
}

// TestManagersNeverOverlap with one Options value per candidate, given to
// every manager it makes (made anew only when its etcd client was
// closed): the same checks, and the same knobs.
func TestReusedOptionsNeverOverlap(t *testing.T) {
	t.Parallel()
	s := short
	s.reuse = true
	managersNeverOverlap(t, s)
}

func managersNeverOverlap(t *testing.T, s setup) {
	if os.Getenv("KUBELOCK_MANAGER_DEFAULTS") == "1" {
		s.ttl, s.timings = defaults.ttl, defaults.timings
	}
	seed, terms := kubetest.EnvInt(t, "KUBELOCK_MANAGER_SEED", 1), kubetest.EnvInt(t, "KUBELOCK_MANAGER_TERMS", 5)
	t.Logf("seed %d, %d terms, TTL %v, %v, reused options %v", seed, terms, s.ttl, s.timings, s.reuse)
	faults := []string{"partition", "delete", "close", "stop", "crash"}
	if f := os.Getenv("KUBELOCK_MANAGER_FAULTS"); f != "" {
		faults = strings.Split(f, ",")
	}
	log, took := runEtcdManagers(t, s, terms, randomFaults(rand.New(rand.NewSource(int64(seed))), faults...))
	took.report(t)
	n, _ := log.started()
	t.Logf("%d runs", n)
	for _, o := range log.overlaps() {
		t.Error(o)
	}
	for _, e := range log.tokensRising() {
		t.Error(e)
	}
}

// The negative control on the same lock: the manager options set by hand
// (the lock and the durations, without Options' BaseContext) leave the
// Runnable working after the record was deleted until client-go stops
// leading; the checker sees the overlap.
// KUBELOCK_MANAGER_FAULT names another fault (partition, close) and
// KUBELOCK_MANAGER_DEFAULTS=1 sets the default durations, to measure.
func TestPlainOptionsOverlapWhenTheRecordIsDeleted(t *testing.T) {
	t.Parallel()
	s := short
	if os.Getenv("KUBELOCK_MANAGER_DEFAULTS") == "1" {
		s = defaults
	}
	s.plain = true
	fault := "delete"
	if f := os.Getenv("KUBELOCK_MANAGER_FAULT"); f != "" {
		fault = f
	}
	log, took := runEtcdManagers(t, s, 3, inTurn(fault))
	took.report(t)
	mustOverlap(t, log, "the plain options")
}
