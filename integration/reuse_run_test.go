package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/pkg/v3/proxy"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// The session-reuse checker drives the public API the way long-running
// programs do — sessions reused for many acquisitions, several locks per
// session, quick acquire/release cycles, releases on expired contexts and
// their retries, an operator breaking and deleting held keys, elections
// resigned on expired contexts — and checks the README's guarantees on
// every run (see reuseResult).

// This file holds the checker's own harness: a run's configuration,
// clients and record, runReuse, and the observer of deletions. Its
// workload is in reuse_worker_test.go, reuse_release_test.go,
// reuse_election_test.go and reuse_operator_test.go, its record in
// reuse_record_test.go, its checks in reuse_check_test.go; the helpers all
// suites share are in helpers_test.go.

// noticeBound (B) is how long a holder whose key was deleted by someone
// else may go on believing it holds the lock, and so how long it may
// overlap the next holder when the operator deleted its key or revoked its
// lease. The lock's doc promises about 200 ms (the own-key watch is created
// 100 ms after the acquisition, and etcd catches a watch from a past
// revision up within another 100 ms). B leaves room for the race
// detector's scheduling on two cores; the operator never deletes the keys
// of a client whose network is being delayed or cut, where etcd's word
// cannot reach the holder sooner than the fault ends.
const noticeBound = time.Second

// Negative controls of the checker: deliberately broken clients whose
// breakage one named invariant must catch.
const (
	reuseIgnoreLost     = "ignore-lost"      // a worker keeps believing it holds a lost lock
	reuseReleaseByName  = "release-by-name"  // release deletes the name's holder key, no compare
	reuseStaleToken     = "stale-token"      // a worker reports an earlier grant's token again
	reuseForgetClose    = "forget-close"     // a worker never closes one of its sessions
	reuseSkipDelay      = "skip-delay"       // a worker acquires lock-delay names without the delay
	reuseOverLimit      = "over-limit"       // a worker reports another semaphore's grants as the run's
	reuseReaderAsWriter = "reader-as-writer" // a worker reports its readers as writers
	reusePartialSet     = "partial-set"      // a worker reports a name its set does not hold
)

var reuseControls = []string{reuseIgnoreLost, reuseReleaseByName, reuseStaleToken, reuseForgetClose, reuseSkipDelay,
	reuseOverLimit, reuseReaderAsWriter, reusePartialSet}

// The kinds of lock a run's names stand for, by their first letter.
const (
	kindPlainName     = iota // a mutex, also taken in sets (AcquireAll)
	kindDelayName            // "d…": a mutex with the run's lock-delay
	kindSemaphoreName        // "s…": a semaphore of reuseLimit holders
	kindRWName               // "r…": a read-write lock
)

func kindOf(name string) int {
	switch name[0] {
	case 'd':
		return kindDelayName
	case 's':
		return kindSemaphoreName
	case 'r':
		return kindRWName
	}
	return kindPlainName
}

// reuseLimit is the limit of the semaphore names.
const reuseLimit = 2

type reuseConfig struct {
	cluster  *etcdtest.Shared
	seed     uint64
	duration time.Duration
	workers  int // lock workers; the last two reach etcd through proxies
	electors int
	names    []string
	ttl      time.Duration
	control  string
	// lockDelay is the WithLockDelay of the names that start with "d".
	lockDelay time.Duration
}

// delayed reports whether name is acquired with a lock-delay.
func (c reuseConfig) delayed(name string) bool {
	return c.lockDelay > 0 && kindOf(name) == kindDelayName
}

// reuseClient is one etcd client of the run, direct or through a proxy.
type reuseClient struct {
	cli   *clientv3.Client
	mu    sync.Mutex
	p     proxy.Server // nil: direct
	quiet time.Duration
}

type reuseRun struct {
	cfg     reuseConfig
	t       *testing.T
	t0      time.Time
	prefix  string
	obs     *clientv3.Client
	clients []*reuseClient

	mu         sync.Mutex
	grants     []*grant
	sessions   []*sessionRec
	actions    []opAction
	deletions  []deletion
	lastRev    int64
	stats      map[string]int
	controlled bool // the control's hazard was set up at least once
	sets       int  // AcquireAll grants so far
}

func (r *reuseRun) now() time.Duration { return time.Since(r.t0) }

// runReuse runs one randomized workload against the public API and checks it.
func runReuse(t *testing.T, cfg reuseConfig) reuseResult {
	t.Helper()
	if cfg.cluster == nil {
		cfg.cluster = shared
	}
	r := &reuseRun{cfg: cfg, t: t, prefix: fmt.Sprintf("/reuse/%d-%s/", cfg.seed, strings.ReplaceAll(t.Name(), "/", "_")), stats: map[string]int{}}
	defer labelRun(r.prefix)()
	r.obs = etcdtest.Client(t, cfg.cluster.Endpoints()...)
	ep := cfg.cluster.Endpoints()[0]
	for i := range cfg.workers {
		c := &reuseClient{}
		if i >= cfg.workers-2 {
			var u string
			c.p, u = etcdtest.Proxy(t, ep)
			c.cli = etcdtest.Client(t, u)
		} else {
			c.cli = etcdtest.Client(t, ep)
		}
		r.clients = append(r.clients, c)
	}
	start, err := r.obs.Get(context.Background(), r.prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	r.t0 = time.Now()
	obsCtx, stopObs := context.WithCancel(context.Background())
	obsDone := make(chan struct{})
	go func() { defer close(obsDone); r.observe(obsCtx, start.Header.Revision+1) }()

	ctx, cancel := context.WithTimeout(context.Background(), cfg.duration)
	defer cancel()
	var wg sync.WaitGroup
	for i := range cfg.workers {
		wg.Add(1)
		go func() { defer wg.Done(); r.lockWorker(ctx, i) }()
	}
	stopElections := r.startElections(ctx)
	opDone := make(chan struct{})
	go func() { defer close(opDone); r.operate(ctx) }()

	<-ctx.Done()
	<-opDone
	r.heal()
	wg.Wait()
	stopElections()
	took := r.now()

	res := reuseResult{seed: cfg.seed, control: cfg.control, took: took}
	res.leakedGoroutines = leakedSince(r.prefix, 3*time.Second)
	left := r.leftovers()
	for _, kv := range left.Kvs {
		res.left = append(res.left, string(kv.Key))
	}
	r.closeForgotten()
	etcdtest.Eventually(t, 10*time.Second, func() bool {
		r.mu.Lock()
		caught := r.lastRev >= left.Header.Revision
		r.mu.Unlock()
		if !caught {
			// A progress notification carries the current revision: every
			// event up to it has been delivered.
			_ = r.obs.RequestProgress(context.Background())
			time.Sleep(50 * time.Millisecond)
		}
		return caught
	}, "the observer's watch did not catch up")
	stopObs()
	<-obsDone
	// Closed here, before the cleanups close the proxies: a proxy's Close
	// waits for the connections through it to end.
	for _, c := range r.clients {
		c.cli.Close()
	}
	r.check(&res)
	return res
}

// leftovers returns the keys left under the prefix once every session was
// closed (a forget-close control's is not). A key of a session whose
// Close returned nil is left at once; a key whose session's revoke failed
// (or an elector's, whose Close is internal) is left if it outlives the
// lease's TTL.
func (r *reuseRun) leftovers() *clientv3.GetResponse {
	deadline := time.Now().Add(r.cfg.ttl + 2*time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		left, err := r.obs.Get(ctx, r.prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		cancel()
		if err != nil {
			r.t.Fatalf("final read: %v", err)
		}
		expiring := false
		r.mu.Lock()
		for _, kv := range left.Kvs {
			if lockDelayKey(string(kv.Key)) {
				continue // see reuseRun.checkLeftovers
			}
			var rec *sessionRec
			for _, s := range r.sessions {
				if s.lease == leaseOfKey(string(kv.Key)) {
					rec = s
				}
			}
			if rec == nil || rec.closed >= 0 && !rec.revoked {
				expiring = true
			}
		}
		r.mu.Unlock()
		if !expiring || time.Now().After(deadline) {
			return left
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// heal ends every network fault.
func (r *reuseRun) heal() {
	for _, c := range r.clients {
		c.mu.Lock()
		if c.p != nil {
			c.p.UnpauseTx()
			c.p.UnpauseRx()
			c.p.UndelayTx()
			c.p.UndelayRx()
		}
		c.mu.Unlock()
	}
}

// closeForgotten closes what a forget-close control left open, once its
// leftovers were counted, so that the run leaks nothing into later tests:
// a session lost meanwhile too, whose goroutines end only with Close.
func (r *reuseRun) closeForgotten() {
	r.mu.Lock()
	var open []*lock.Session
	for _, s := range r.sessions {
		if s.s != nil && s.closed < 0 {
			open = append(open, s.s)
		}
	}
	r.mu.Unlock()
	for _, s := range open {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.Close(ctx)
		cancel()
	}
}

// observe records every deletion under the prefix, from rev on.
func (r *reuseRun) observe(ctx context.Context, rev int64) {
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(ctx)
		for wr := range r.obs.Watch(wctx, r.prefix, clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithRev(rev)) {
			if wr.Err() != nil {
				break
			}
			now := r.now()
			r.mu.Lock()
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete && ev.PrevKv != nil {
					r.deletions = append(r.deletions, deletion{key: string(ev.Kv.Key), createRev: ev.PrevKv.CreateRevision, modRev: ev.Kv.ModRevision, at: now})
				}
			}
			rev = wr.Header.Revision + 1
			r.lastRev = wr.Header.Revision
			r.mu.Unlock()
		}
		cancel()
	}
}
