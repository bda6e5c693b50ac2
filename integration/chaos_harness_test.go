package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/pkg/v3/proxy"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/embedded"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
)

// The fault suite's own harness (TestFaultSuite, TestChaos): a run's
// configuration and record, runChaos with its workers' proxies and the
// faults it injects, and the observer of every key. Its workers are in
// chaos_worker_test.go, its model in chaos_model_test.go, its checks in
// chaos_check_test.go; the helpers all suites share are in
// helpers_test.go.

// Negative controls: deliberately broken clients the checks must catch.
const (
	controlNone          = ""
	controlUnfenced      = "unfenced-writes"   // writes skip the token check
	controlNoDeadline    = "no-local-deadline" // a holder trusts only etcd's word that it lost
	controlReleaseByName = "release-by-name"   // release deletes the name's holder key, no compare
	controlSerialSet     = "serial-set"        // a multi-lock's names taken one Acquire at a time
	controlNoDelay       = "no-lock-delay"     // lock-delay runs whose sessions have none
)

// Kinds of lock a fault run exercises (chaosConfig.kind).
const (
	kindMutex     = ""           // Acquire
	kindSemaphore = "semaphore"  // Acquire with WithLimit(chaosConfig.limit)
	kindRWLock    = "rwlock"     // Acquire, half of them WithShared
	kindMulti     = "multi"      // AcquireAll of a random set of the names, in random order
	kindDelay     = "lock-delay" // Acquire on sessions WithLockDelay(chaosLockDelay)
)

// chaosLockDelay is the lock-delay of kindDelay runs.
const chaosLockDelay = time.Second

type chaosConfig struct {
	kind     string
	limit    int               // a semaphore's limit
	cluster  *embedded.Cluster // nil: start a fresh 3-member cluster
	prefix   string            // key prefix of the run's locks
	seed     uint64
	workers  int
	names    []string
	duration time.Duration
	ttl      time.Duration
	control  string
}

// term is one holder's belief that it held a lock.
type term struct {
	name          string
	part          string // what one token orders: the name, or a semaphore's "name#slot"
	key           string // the key whose create revision is token (etcdfence compares it)
	shared        bool   // a reader of a read-write lock
	slot          int    // a semaphore holder's slot, else -1
	worker        int
	token         fencing.Token
	start, end    time.Duration // believed ACTIVE interval, since the run's start
	lostAt        time.Duration // when the client declared it lost by its deadline (0 if not)
	releaseCall   time.Duration // when the holder called Release (0 if not yet)
	partitionedAt time.Duration // when its worker was last cut off while holding (0 if never)
}

type chaosRun struct {
	cfg     chaosConfig
	t       *testing.T
	t0      time.Time
	cluster *embedded.Cluster
	obs     *clientv3.Client
	guard   fencing.Guard

	mu           sync.Mutex
	history      []porcupine.Operation
	terms        []*term
	applied      map[string][]fencing.Token  // register writes in applied order, per name
	putAt        map[partToken]time.Duration // creations the observer saw
	deletedAt    map[partToken]time.Duration // deletions the observer saw
	faults       map[string]int
	seenRev      int64 // the revision the observer's watch has reached
	badReleases  int
	staleTries   int
	staleRejects int
}

// chaosResult is what one run measured and found.
type chaosResult struct {
	kind                           string
	seed                           uint64
	control                        string
	ops                            int
	faults                         map[string]int
	check                          porcupine.CheckResult
	staleAttempted, staleRejected  int
	staleAccepted                  int
	doubleGrants, tokenRegressions int
	overLimit                      int // semaphore holders in a slot outside [0, limit)
	partialSets                    int // an AcquireAll set whose keys were not all created at its token
	shortDelays                    int // a holder active sooner than the lock-delay after an unclean end
	uncleanEnds                    int // unclean ends followed by a holder, in lock-delay runs
	badReleases                    int
	earlyDeletes                   int
	minLead, maxStuck              time.Duration
	hashesEqual                    bool
	visualization                  string
	phases                         string // where the run's time went
}

func (r chaosResult) violations() int {
	v := r.staleAccepted + r.doubleGrants + r.tokenRegressions + r.badReleases + r.earlyDeletes + r.overLimit + r.partialSets + r.shortDelays
	if r.check == porcupine.Illegal {
		v++
	}
	if !r.hashesEqual {
		v++
	}
	return v
}

func (r chaosResult) String() string {
	lead := "n/a"
	if r.minLead >= 0 {
		lead = r.minLead.Round(time.Millisecond).String()
	}
	return fmt.Sprintf("kind=%q seed=%d control=%q ops=%d faults=%v history=%s stale(attempted=%d rejected=%d accepted=%d) double-grants=%d over-limit=%d partial-sets=%d short-delays=%d/%d token-regressions=%d bad-releases=%d early-deletes=%d min-lead=%s max-stuck=%v hashkv-equal=%v took=%s",
		r.kind, r.seed, r.control, r.ops, r.faults, r.check, r.staleAttempted, r.staleRejected, r.staleAccepted,
		r.doubleGrants, r.overLimit, r.partialSets, r.shortDelays, r.uncleanEnds, r.tokenRegressions, r.badReleases, r.earlyDeletes, lead, r.maxStuck.Round(time.Millisecond), r.hashesEqual, r.phases)
}

func (c *chaosRun) now() time.Duration { return time.Since(c.t0) }

func (c *chaosRun) record(op porcupine.Operation) {
	c.mu.Lock()
	defer c.mu.Unlock()
	op.ClientId = len(c.history) // unique per operation: intervals may overlap freely
	c.history = append(c.history, op)
}

func (c *chaosRun) fault(kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults[kind]++
}

// runChaos runs one randomized fault run and checks its history.
func runChaos(t *testing.T, cfg chaosConfig) chaosResult {
	t.Helper()
	start := time.Now()
	var marks []string
	mark := func(phase string) {
		marks = append(marks, fmt.Sprintf("%s %v", phase, time.Since(start).Round(100*time.Millisecond)))
		start = time.Now()
	}
	c := &chaosRun{cfg: cfg, t: t, applied: map[string][]fencing.Token{}, putAt: map[partToken]time.Duration{},
		deletedAt: map[partToken]time.Duration{}, faults: map[string]int{}}
	c.cluster = cfg.cluster
	if c.cluster == nil {
		c.cluster = chaosCluster(t)
	}
	if c.cfg.prefix == "" {
		c.cfg.prefix = fmt.Sprintf("/chaos/%d/", cfg.seed)
	}
	c.obs = etcdtest.Client(t, c.cluster.Endpoints()...)
	mark("start")
	c.t0 = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.duration)
	defer cancel()

	obsDone := make(chan struct{})
	obsCtx, stopObs := context.WithCancel(context.Background())
	go func() { defer close(obsDone); c.observe(obsCtx) }()

	type worker struct {
		proxies []proxy.Server
		cli     *clientv3.Client
	}
	workers := make([]*worker, cfg.workers)
	for i := range workers {
		w := &worker{}
		var urls []string
		for _, ep := range c.cluster.Endpoints() {
			p, u := etcdtest.Proxy(t, ep)
			w.proxies = append(w.proxies, p)
			urls = append(urls, u)
		}
		w.cli = etcdtest.Client(t, urls...)
		workers[i] = w
	}
	cut := func(i int, on bool) {
		for _, p := range workers[i].proxies {
			if on {
				p.BlackholeTx()
				p.BlackholeRx()
			} else {
				p.UnblackholeTx()
				p.UnblackholeRx()
			}
		}
	}
	var wg sync.WaitGroup
	paused := make([]chan time.Duration, cfg.workers)
	for i := range workers {
		paused[i] = make(chan time.Duration, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.work(ctx, i, workers[i].cli, paused[i], func(on bool) { cut(i, on) })
		}()
	}

	// Faults, drawn from the seed. One crash or restart at a time: a member
	// still coming back must not be killed again by the next fault.
	rng := rand.New(rand.NewPCG(cfg.seed, 0xe7cd))
	var crashing sync.Mutex
	var faultWG sync.WaitGroup
	for step := 0; ; step++ {
		wait := time.Duration(600+rng.IntN(900)) * time.Millisecond
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		if ctx.Err() != nil {
			break
		}
		if cfg.control != controlNone && step > 0 {
			// Crashes and leader changes make etcd extend every lease,
			// which can spare a control its hazard; controls get only
			// their pauses.
			continue
		}
		switch k := rng.IntN(12); {
		case cfg.kind == kindDelay && cfg.control == controlNone && step == 0:
			// A lock-delay run needs unclean ends to check: one worker
			// pauses at its next turn holding the lock, past its lease.
			select {
			case paused[rng.IntN(cfg.workers)] <- cfg.ttl + time.Duration(2000+rng.IntN(1000))*time.Millisecond:
				c.fault("pause")
			default:
			}
		case cfg.control != controlNone && step == 0:
			// A control must meet the hazard it is built to mishandle:
			// every worker pauses, at its next turn holding the lock, for
			// longer than etcd takes to expire its lease and hand over.
			for i := range paused {
				select {
				case paused[i] <- cfg.ttl + time.Duration(2000+rng.IntN(1000))*time.Millisecond:
					c.fault("pause")
				default:
				}
			}
		case k < 3: // pause a worker: stale writes follow
			i := rng.IntN(cfg.workers)
			select {
			case paused[i] <- time.Duration(2500+rng.IntN(1500)) * time.Millisecond:
				c.fault("pause")
			default:
			}
		case k < 5: // partition a worker from every member
			i, d := rng.IntN(cfg.workers), time.Duration(1000+rng.IntN(3000))*time.Millisecond
			c.fault("partition")
			faultWG.Add(1)
			go func() {
				defer faultWG.Done()
				cut(i, true)
				time.Sleep(d)
				cut(i, false)
			}()
		case k < 6: // slow network for a worker
			i := rng.IntN(cfg.workers)
			c.fault("delay")
			faultWG.Add(1)
			go func() {
				defer faultWG.Done()
				for _, p := range workers[i].proxies {
					p.DelayTx(150*time.Millisecond, 50*time.Millisecond)
				}
				time.Sleep(1500 * time.Millisecond)
				for _, p := range workers[i].proxies {
					p.UndelayTx()
				}
			}()
		case k < 7: // lost replies: requests arrive, answers do not
			i, d := rng.IntN(cfg.workers), time.Duration(300+rng.IntN(700))*time.Millisecond
			c.fault("reply-loss")
			faultWG.Add(1)
			go func() {
				defer faultWG.Done()
				for _, p := range workers[i].proxies {
					p.BlackholeRx()
				}
				time.Sleep(d)
				for _, p := range workers[i].proxies {
					p.UnblackholeRx()
				}
			}()
		case k < 9: // move leadership
			if l, err := c.cluster.Leader(ctx); err == nil {
				to := c.cluster.Member(rng.IntN(3))
				if to != l && to.Running() {
					mctx, mcancel := context.WithTimeout(ctx, 3*time.Second)
					if l.Etcd().Server.MoveLeader(mctx, uint64(l.Etcd().Server.MemberID()), uint64(to.Etcd().Server.MemberID())) == nil {
						c.fault("move-leader")
					}
					mcancel()
				}
			}
		case k == 11 && crashing.TryLock(): // crash and restart the whole cluster
			c.fault("cluster-restart")
			faultWG.Add(1)
			go func() {
				defer faultWG.Done()
				defer crashing.Unlock()
				var mwg sync.WaitGroup
				for _, m := range c.cluster.Members() {
					mwg.Add(1)
					go func() { defer mwg.Done(); m.HardStop() }()
				}
				mwg.Wait()
				for _, m := range c.cluster.Members() {
					mwg.Add(1)
					go func() {
						defer mwg.Done()
						rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
						defer rcancel()
						if err := m.Restart(rctx); err != nil {
							t.Errorf("restart %s: %v", m, err)
						}
					}()
				}
				mwg.Wait()
			}()
		default: // crash a member (leader or not) and restart it
			m := c.cluster.Member(rng.IntN(3))
			if k != 11 && crashing.TryLock() {
				c.fault("member-crash")
				faultWG.Add(1)
				go func() {
					defer faultWG.Done()
					defer crashing.Unlock()
					m.HardStop()
					rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer rcancel()
					if err := m.Restart(rctx); err != nil {
						t.Errorf("restart %s: %v", m, err)
					}
				}()
			}
		}
	}
	mark("run")
	// Every worker's call is bounded by a few seconds and every fault
	// ends within 30 s: a settle that takes a minute is a hang, whose
	// stacks are the evidence.
	stuck := time.AfterFunc(time.Minute, func() {
		t.Errorf("the run's workers and faults have not ended a minute after the run; goroutines:\n%s", goroutineDump())
	})
	wg.Wait()
	faultWG.Wait()
	stuck.Stop()
	mark("settle")
	for i := range workers {
		cut(i, false)
	}
	// Let the observer see the last expiries (every lease expires within
	// its TTL plus etcd's expiry-check period), then stop it.
	drain := time.Now().Add(cfg.ttl + 2*time.Second)
	for time.Now().Before(drain) {
		dctx, dcancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := c.obs.Get(dctx, c.cfg.prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		dcancel()
		if err == nil && resp.Count == 0 {
			// The observer's watch trails the read: wait until it has
			// reached the read's revision (a progress notification
			// carries the current one).
			etcdtest.Eventually(t, 30*time.Second, func() bool {
				c.mu.Lock()
				caught := c.seenRev >= resp.Header.Revision
				c.mu.Unlock()
				if !caught {
					_ = c.obs.RequestProgress(clientv3.WithRequireLeader(context.Background()))
				}
				return caught
			}, "the observer's watch did not catch up")
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopObs()
	<-obsDone
	mark("drain")
	r := c.check(t)
	mark("check")
	r.phases = strings.Join(marks, ", ")
	return r
}

// partToken names one key: its model part and create revision (the keys of
// an AcquireAll share a revision, one per name).
type partToken struct {
	part string
	tok  fencing.Token
}

// partOfKey is the model partition of a key under the run's prefix: its
// lock name, or "name#slot" for a semaphore's slot key.
func partOfKey(key string) string {
	name, leaf := filepath.Base(filepath.Dir(key)), filepath.Base(key)
	if base, ok := strings.CutSuffix(name, "%slot"); ok {
		return base + "#" + leaf
	}
	return name
}

// observe records every key creation and deletion under the lock prefix.
func (c *chaosRun) observe(ctx context.Context) {
	rev := int64(0)
	for ctx.Err() == nil {
		opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithPrevKV()}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for wr := range c.obs.Watch(wctx, c.cfg.prefix, opts...) {
			if wr.Err() != nil {
				break
			}
			now := c.now()
			c.mu.Lock()
			for _, ev := range wr.Events {
				name := partOfKey(string(ev.Kv.Key))
				switch ev.Type {
				case mvccpb.PUT:
					if ev.IsCreate() {
						c.putAt[partToken{name, fencing.Token(ev.Kv.CreateRevision)}] = now
					}
				case mvccpb.DELETE:
					// The key is known to exist no later than its PUT was
					// seen; the deletion happened before now.
					if ev.PrevKv != nil {
						c.deletedAt[partToken{name, fencing.Token(ev.PrevKv.CreateRevision)}] = now
					}
				}
			}
			rev = wr.Header.Revision + 1
			c.seenRev = wr.Header.Revision
			c.mu.Unlock()
		}
		cancel()
	}
}
