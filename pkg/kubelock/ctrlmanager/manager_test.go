package ctrlmanager_test

import (
	"context"
	"fmt"
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	fakecoordination "k8s.io/client-go/kubernetes/typed/coordination/v1/fake"
	k8stesting "k8s.io/client-go/testing"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/kubelock"
	"github.com/etcdlock/etcdlock/pkg/kubelock/ctrlmanager"
	"github.com/etcdlock/etcdlock/pkg/kubelock/internal/kubetest"
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
}

// etcdCandidate is a candidate on the etcd lock, reaching etcd through
// its own proxy.
type etcdCandidate struct {
	*candidate
	proxy proxy.Server
	mu    sync.Mutex
	cli   *clientv3.Client // the current incarnation's
}

func newEtcdCandidate(t testing.TB, who string, member int, s setup, release bool) *etcdCandidate {
	p, url := etcdtest.Proxy(t, cluster.Endpoints()[member])
	c := &etcdCandidate{proxy: p}
	pfx := "/ctrlmanager/" + strings.ReplaceAll(t.Name(), "/", "_") + "/"
	c.candidate = &candidate{who: who, start: func() (incarnation, error) {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return incarnation{}, err
		}
		lk, err := kubelock.New(cli, "ctl", who, kubelock.WithPrefix(pfx), kubelock.WithTTL(s.ttl),
			kubelock.WithTimings(s.timings), kubelock.WithCleanupTimeout(time.Second))
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
		opts := manager.Options{LeaderElectionReleaseOnCancel: release}
		if s.plain {
			opts.LeaderElection = true
			opts.LeaderElectionResourceLockInterface = lk
			opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = &s.timings.LeaseDuration, &s.timings.RenewDeadline, &s.timings.RetryPeriod
		} else if opts, err = ctrlmanager.Options(lk, opts); err != nil {
			closeAll()
			return incarnation{}, err
		}
		c.mu.Lock()
		c.cli = cli
		c.mu.Unlock()
		return incarnation{opts: opts, close: closeAll}, nil
	}}
	return c
}

func (c *etcdCandidate) closeClient() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cli.Close()
}

// fault is applied to the current leader; it returns the heal, run once
// the next leader works.
type fault func(who string) (heal func())

// drive applies faults picked at random to the leader until terms runs
// have started, and returns how long each fault took to the next run.
func drive(t testing.TB, log *workLog, rnd *rand.Rand, terms int, within time.Duration, faults map[string]fault) failovers {
	t.Helper()
	names := make([]string, 0, len(faults))
	for name := range faults {
		names = append(names, name)
	}
	slices.Sort(names)
	took := failovers{}
	for {
		var n int
		var cur string
		log.waitFor(t, within, "leader", func() bool { n, cur = log.started(); return cur != "" })
		if n >= terms {
			return took
		}
		name := names[rnd.Intn(len(names))]
		run := log.current()
		at := time.Now()
		heal := faults[name](cur)
		var next time.Time
		log.waitFor(t, within, "next leader after "+name+" of "+cur, func() bool {
			log.mu.Lock()
			defer log.mu.Unlock()
			if len(log.runs) > n {
				next = log.runs[n].first
				return true
			}
			return false
		})
		took[name] = append(took[name], next.Sub(at))
		// The fault lasts until the faulty leader's Runnable stopped, as a
		// sustained partition does.
		log.waitFor(t, within, "the end of "+cur+"'s run", func() bool {
			log.mu.Lock()
			defer log.mu.Unlock()
			return run.done
		})
		heal()
		time.Sleep(time.Duration(rnd.Intn(500)) * time.Millisecond) // the leader works a while
	}
}

// etcdFaults are the faults of a leader on the etcd lock: partitioned
// from etcd, its record deleted by hand, its etcd client closed, its
// manager stopped (released or not, as the candidate is configured),
// crashed.
func etcdFaults(t testing.TB, cands map[string]*etcdCandidate) map[string]fault {
	direct := etcdtest.Client(t, cluster.Endpoints()...)
	key := "/ctrlmanager/" + strings.ReplaceAll(t.Name(), "/", "_") + "/ctl"
	nothing := func() {}
	return map[string]fault{
		"partition": func(who string) func() {
			p := cands[who].proxy
			p.BlackholeTx()
			p.BlackholeRx()
			return func() { p.UnblackholeTx(); p.UnblackholeRx() }
		},
		"delete": func(string) func() {
			if _, err := direct.Delete(context.Background(), key); err != nil {
				t.Error(err)
			}
			return nothing
		},
		"close": func(who string) func() { cands[who].closeClient(); return nothing },
		// A crash: the process is cut off and its manager gone at once;
		// etcd expires the record.
		"crash": func(who string) func() {
			p := cands[who].proxy
			p.BlackholeTx()
			p.BlackholeRx()
			cands[who].stopManager()
			return func() { p.UnblackholeTx(); p.UnblackholeRx() }
		},
		"stop": func(who string) func() { cands[who].stopManager(); return nothing },
	}
}

// runEtcdManagers runs three candidates on the etcd lock with setup s
// (one of them does not release when stopped) and applies faults until
// terms runs have started; it returns the work log.
func runEtcdManagers(t *testing.T, s setup, terms int, seed int64, faults ...string) *workLog {
	log := newWorkLog()
	cfg := kubetest.NoAPIServer(t)
	cands := map[string]*etcdCandidate{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for i := range 3 {
		who := fmt.Sprintf("m%d", i)
		cands[who] = newEtcdCandidate(t, who, i, s, i != 2)
		cands[who].run(t, ctx, &wg, cfg, log)
	}
	all := etcdFaults(t, cands)
	pick := map[string]fault{}
	for _, f := range faults {
		pick[f] = all[f]
	}
	within := 10 * (s.ttl + s.timings.RetryPeriod + s.timings.RenewDeadline)
	took := drive(t, log, rand.New(rand.NewSource(seed)), terms, within, pick)
	for _, c := range cands {
		c.proxy.UnblackholeTx()
		c.proxy.UnblackholeRx()
	}
	took.report(t)
	return log
}

// Real controller-runtime managers set up with Options, each running a
// plain leader-only Runnable that works until its context ends; the
// leader is partitioned, its record deleted, its etcd client closed and
// its manager stopped or crashed, at random (seed KUBELOCK_MANAGER_SEED). No
// Runnable works after the next one started, on this process's clock.
// KUBELOCK_MANAGER_TERMS sets how many terms (default 5);
// KUBELOCK_MANAGER_DEFAULTS=1 runs with the default durations.
func TestManagersNeverOverlap(t *testing.T) {
	s := short
	if os.Getenv("KUBELOCK_MANAGER_DEFAULTS") == "1" {
		s = defaults
	}
	seed, terms := kubetest.EnvInt(t, "KUBELOCK_MANAGER_SEED", 1), kubetest.EnvInt(t, "KUBELOCK_MANAGER_TERMS", 5)
	t.Logf("seed %d, %d terms, TTL %v, %v", seed, terms, s.ttl, s.timings)
	log := runEtcdManagers(t, s, terms, int64(seed), "partition", "delete", "close", "stop", "crash")
	n, _ := log.started()
	t.Logf("%d runs", n)
	for _, o := range log.overlaps() {
		t.Error(o)
	}
}

// The negative control on the same lock: the manager options set by hand
// (the lock and the durations, without Options' BaseContext) leave the
// Runnable working after the record was deleted until client-go stops
// leading; the checker sees the overlap.
// KUBELOCK_MANAGER_FAULT names another fault (partition, close) and
// KUBELOCK_MANAGER_DEFAULTS=1 sets the default durations, to measure.
func TestPlainOptionsOverlapWhenTheRecordIsDeleted(t *testing.T) {
	s := short
	if os.Getenv("KUBELOCK_MANAGER_DEFAULTS") == "1" {
		s = defaults
	}
	s.plain = true
	fault := "delete"
	if f := os.Getenv("KUBELOCK_MANAGER_FAULT"); f != "" {
		fault = f
	}
	log := runEtcdManagers(t, s, 3, 1, fault)
	overlaps := log.overlaps()
	if len(overlaps) == 0 {
		t.Error("no overlap with the plain options: the check cannot fail")
	}
	for _, o := range overlaps {
		t.Logf("plain options: %s", o)
	}
}

// The negative control with client-go's Lease lock (on client-go's fake
// clientset) in a configuration known to overlap: ReleaseOnCancel, and a
// partitioned leader whose calls hang. It stops leading RetryPeriod +
// RenewDeadline after its last renewal and returns from its release
// another RenewDeadline later, while a follower takes over LeaseDuration
// after it last saw the Lease change. KUBELOCK_MANAGER_DEFAULTS=1 runs it
// with the default durations.
func TestLeaseLockOverlapsUnderPartition(t *testing.T) {
	tracker := k8stesting.NewObjectTracker(scheme.Scheme, scheme.Codecs.UniversalDecoder())
	fake := &k8stesting.Fake{}
	fake.AddReactor("*", "*", k8stesting.ObjectReaction(tracker))
	leases := &fakecoordination.FakeCoordinationV1{Fake: fake}
	tm := kubelock.Timings{LeaseDuration: 1200 * time.Millisecond, RenewDeadline: time.Second, RetryPeriod: 200 * time.Millisecond}
	if os.Getenv("KUBELOCK_MANAGER_DEFAULTS") == "1" {
		tm = kubelock.DefaultTimings
	}
	t.Logf("%v", tm)

	log := newWorkLog()
	cfg := kubetest.NoAPIServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	cuts := map[string]*cut{}
	for i := range 2 {
		who := fmt.Sprintf("m%d", i)
		c := &cut{}
		cuts[who] = c
		cand := &candidate{who: who, start: func() (incarnation, error) {
			c.Interface = &rl.LeaseLock{
				LeaseMeta:  metav1.ObjectMeta{Namespace: "default", Name: "ctl"},
				Client:     leases,
				LockConfig: rl.ResourceLockConfig{Identity: who},
			}
			return incarnation{opts: manager.Options{
				LeaderElection:                      true,
				LeaderElectionResourceLockInterface: c,
				LeaderElectionReleaseOnCancel:       true,
				LeaseDuration:                       &tm.LeaseDuration,
				RenewDeadline:                       &tm.RenewDeadline,
				RetryPeriod:                         &tm.RetryPeriod,
			}, close: func() {}}, nil
		}}
		cand.run(t, ctx, &wg, cfg, log)
	}
	took := drive(t, log, rand.New(rand.NewSource(1)), 3, 10*(tm.LeaseDuration+2*tm.RenewDeadline), map[string]fault{
		"partition": func(who string) func() { cuts[who].cut(); return cuts[who].restore },
	})
	took.report(t)
	for _, c := range cuts {
		c.restore()
	}
	overlaps := log.overlaps()
	if len(overlaps) == 0 {
		t.Error("no overlap with client-go's Lease lock: the check cannot fail")
	}
	for _, o := range overlaps {
		t.Logf("Lease lock: %s", o)
	}
}
