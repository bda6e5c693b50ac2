package lock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/etcdlock/etcdlock/pkg/embedded"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// The scale suite: `make bench-scale` runs these with -benchtime 1x
// against a 3-member cluster of separate processes (ETCDLOCK_BENCH_ENDPOINTS;
// hack/bench-scale.sh), each scenario once per b.N. Server figures come
// from the members' own /metrics. Without ETCDLOCK_BENCH_ENDPOINTS they run
// against this process's embedded etcd, and the memory figures then mix
// client and server.

// scrapeEndpoints are the members whose /metrics to read: every member of
// an external cluster; one of the in-process cluster, whose members all
// report into this process's one Prometheus registry.
func scrapeEndpoints() []string {
	eps := benchEndpoints()
	if os.Getenv("ETCDLOCK_BENCH_ENDPOINTS") == "" {
		return eps[:1]
	}
	return eps
}

// scrape reads each member's /metrics and returns, per member, every
// metric's value summed over its labels (histograms and summaries by their
// _sum and _count lines).
func scrape(b *testing.B) []map[string]float64 {
	var out []map[string]float64
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}} // no idle connection outlives the scrape
	for _, ep := range scrapeEndpoints() {
		resp, err := hc.Get(ep + "/metrics")
		if err != nil {
			b.Fatalf("scrape %s: %v", ep, err)
		}
		m := map[string]float64{}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if line == "" || line[0] == '#' {
				continue
			}
			name, rest, _ := strings.Cut(line, " ")
			name, _, _ = strings.Cut(name, "{")
			if i := strings.LastIndexByte(line, ' '); i >= 0 {
				rest = line[i+1:]
			}
			if v, err := strconv.ParseFloat(rest, 64); err == nil {
				m[name] += v
			}
		}
		resp.Body.Close()
		if err := sc.Err(); err != nil {
			b.Fatalf("scrape %s: %v", ep, err)
		}
		out = append(out, m)
	}
	return out
}

// sum adds metric name over the members.
func sum(members []map[string]float64, name string) float64 {
	var n float64
	for _, m := range members {
		n += m[name]
	}
	return n
}

// maxOf is metric name's largest value among the members.
func maxOf(members []map[string]float64, name string) float64 {
	var n float64
	for _, m := range members {
		n = max(n, m[name])
	}
	return n
}

// quantile is the q-quantile (0 < q ≤ 1, nearest rank) of d, in ms.
func quantile(d []time.Duration, q float64) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return float64(s[min(max(i, 0), len(s)-1)]) / float64(time.Millisecond)
}

// parallel runs fn(0..n-1), 32 at a time, failing b on the first error.
func parallel(b *testing.B, n int, fn func(i int) error) {
	var (
		wg    sync.WaitGroup
		slots = make(chan struct{}, 32)
		mu    sync.Mutex
		first error
	)
	for i := range n {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			if err := fn(i); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if first != nil {
		b.Fatal(first)
	}
}

// openSessions opens n etcdlock sessions (or, for impl mutex, n
// concurrency sessions with the same TTL) on cli, closed when b ends.
func openSessions(b *testing.B, cli *clientv3.Client, impl string, n int, pfx string) ([]*lock.Session, []*concurrency.Session) {
	ctx := context.Background()
	ls := make([]*lock.Session, n)
	ms := make([]*concurrency.Session, n)
	parallel(b, n, func(i int) (err error) {
		if impl == "mutex" {
			ms[i], err = concurrency.NewSession(cli, concurrency.WithTTL(10))
			return err
		}
		ls[i], err = lock.NewSession(ctx, cli, lock.WithPrefix(pfx))
		return err
	})
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		parallel(b, n, func(i int) error {
			if ls[i] != nil {
				ls[i].Close(ctx)
			}
			if ms[i] != nil {
				ms[i].Close()
			}
			return nil
		})
	})
	if impl == "mutex" {
		return nil, ms
	}
	return ls, nil
}

// BenchmarkScaleHolders: N sessions each holding 10 locks, N = 100 and
// 1,000, beside as many concurrency.Sessions holding 10
// concurrency.Mutexes (same 10 s TTL). It reports the client's heap and
// goroutines per session (all sessions share one client), the members'
// resident memory, watch streams and watchers, and lease renewals per
// second over a 10 s window of holding.
func BenchmarkScaleHolders(b *testing.B) {
	for _, n := range []int{100, 1000} {
		for _, impl := range []string{"etcdlock", "mutex"} {
			b.Run(fmt.Sprintf("sessions=%d/impl=%s", n, impl), func(b *testing.B) {
				for range b.N {
					benchHolders(b, impl, n)
				}
			})
		}
	}
}

func benchHolders(b *testing.B, impl string, n int) {
	const locksPerSession = 10
	window := 10 * time.Second
	ctx := context.Background()
	cli := etcdtest.Client(b, benchEndpoints()...)
	if _, err := cli.Get(ctx, "warm-up"); err != nil {
		b.Fatal(err)
	}
	pfx := fmt.Sprintf("/bench/holders/%s/%d/", impl, time.Now().UnixNano())
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	g0 := runtime.NumGoroutine()
	m0 := scrape(b)
	ls, ms := openSessions(b, cli, impl, n, pfx)
	held := make([][]any, n)
	parallel(b, n, func(i int) error {
		for j := range locksPerSession {
			name := fmt.Sprintf("s%d-l%d", i, j)
			if impl == "mutex" {
				m := concurrency.NewMutex(ms[i], pfx+name)
				if err := m.Lock(ctx); err != nil {
					return err
				}
				held[i] = append(held[i], m)
				continue
			}
			l, err := ls[i].Acquire(ctx, name)
			if err != nil {
				return err
			}
			held[i] = append(held[i], l)
		}
		return nil
	})
	time.Sleep(2 * time.Second) // the holders' watches are open
	r0, t0 := sum(scrape(b), "etcd_debugging_lease_renewed_total"), time.Now()
	time.Sleep(window)
	m1 := scrape(b)
	renewals := (sum(m1, "etcd_debugging_lease_renewed_total") - r0) / time.Since(t0).Seconds()
	runtime.GC()
	runtime.ReadMemStats(&after)
	g1 := runtime.NumGoroutine()
	lost := 0
	for i := range held {
		for _, h := range held[i] {
			if l, ok := h.(*lock.Lock); ok && l.Err() != nil {
				lost++
			}
		}
	}
	if lost > 0 {
		b.Fatalf("%d held locks lost while holding", lost)
	}
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(n)/1024, "client-heap-KB/session")
	b.ReportMetric(float64(g1-g0)/float64(n), "client-goroutines/session")
	b.ReportMetric(maxOf(m1, "process_resident_memory_bytes")/(1<<20), "member-RSS-MB")
	b.ReportMetric(sum(m1, "etcd_debugging_mvcc_watch_stream_total")-sum(m0, "etcd_debugging_mvcc_watch_stream_total"), "watch-streams")
	b.ReportMetric(sum(m1, "etcd_debugging_mvcc_watcher_total")-sum(m0, "etcd_debugging_mvcc_watcher_total"), "watchers")
	b.ReportMetric(renewals, "renewals/s")
	runtime.KeepAlive(held)
}

// BenchmarkScaleHotName: 1,000 sessions queue on one name, then the queue
// drains, each holder releasing at once. It reports the handoff (release
// reply → next holder active) p50 and p99, the watch events etcd sends and
// the reads and writes the contenders send per handoff, and the time the
// whole queue takes to drain; beside 1,000 concurrency.Mutex waiters.
func BenchmarkScaleHotName(b *testing.B) {
	for _, impl := range []string{"etcdlock", "mutex"} {
		b.Run("waiters=1000/impl="+impl, func(b *testing.B) {
			for range b.N {
				benchHotName(b, impl, 1000)
			}
		})
	}
}

func benchHotName(b *testing.B, impl string, n int) {
	ctx := context.Background()
	var rpcs rpcCounter
	cli := countingClient(b, &rpcs, benchEndpoints()...)
	pfx := fmt.Sprintf("/bench/hot/%s/%d/", impl, time.Now().UnixNano())
	ls, ms := openSessions(b, cli, impl, n, pfx)
	var (
		mu       sync.Mutex
		acquired = make([]time.Time, n) // by order of acquisition
		released = make([]time.Time, n)
		next     int
		gate     = make(chan struct{})
		wg       sync.WaitGroup
	)
	for i := range n {
		var l locker
		if impl == "mutex" {
			l = &mutexLocker{concurrency.NewMutex(ms[i], pfx+"h")}
		} else {
			l = &etcdlockLocker{s: ls[i]}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.lock(ctx); err != nil {
				b.Error(err)
				return
			}
			mu.Lock()
			k := next
			next++
			acquired[k] = time.Now()
			mu.Unlock()
			<-gate // the first holder holds until every contender waits
			if err := l.unlock(ctx); err != nil {
				b.Error(err)
				return
			}
			mu.Lock()
			released[k] = time.Now()
			mu.Unlock()
		}()
	}
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		resp, err := cli.Get(ctx, pfx, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			b.Fatal(err)
		}
		if resp.Count == int64(n) {
			break
		}
		if time.Since(start) > 2*time.Minute {
			b.Fatalf("%d of %d contenders queued after 2 minutes", resp.Count, n)
		}
	}
	m0 := scrape(b)
	reads0, writes0 := rpcs.reads.Load(), rpcs.writes.Load()
	start := time.Now()
	close(gate)
	wg.Wait()
	drain := time.Since(start)
	m1 := scrape(b)
	if next != n {
		b.Fatalf("%d of %d contenders acquired", next, n)
	}
	handoffs := make([]time.Duration, n-1)
	for k := range handoffs {
		handoffs[k] = acquired[k+1].Sub(released[k])
	}
	h := float64(n - 1)
	b.ReportMetric(quantile(handoffs, 0.5), "handoff-p50-ms")
	b.ReportMetric(quantile(handoffs, 0.99), "handoff-p99-ms")
	b.ReportMetric((sum(m1, "etcd_debugging_mvcc_events_total")-sum(m0, "etcd_debugging_mvcc_events_total"))/h, "events/handoff")
	b.ReportMetric(float64(rpcs.reads.Load()-reads0)/h, "reads/handoff")
	b.ReportMetric(float64(rpcs.writes.Load()-writes0)/h, "writes/handoff")
	b.ReportMetric(drain.Seconds(), "drain-s")
}

// churnRecord is one acquisition in a churn run.
type churnRecord struct {
	name  int
	token int64 // etcdlock only
	at    time.Time
	wait  time.Duration
}

// churn runs one goroutine per session, each acquiring and releasing
// random names among names until ctx ends; errors (as during a leader
// change) are counted and the operation retried. A release is retried
// until it succeeds or the lock is lost.
func churn(ctx context.Context, ls []*lock.Session, ms []*concurrency.Session, pfx string, names int, seed uint64) (recs []churnRecord, errs map[string]int) {
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	errs = map[string]int{}
	for i := range max(len(ls), len(ms)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			var mine []churnRecord
			bad := map[string]int{}
			defer func() {
				mu.Lock()
				recs = append(recs, mine...)
				for k, n := range bad {
					errs[k] += n
				}
				mu.Unlock()
			}()
			for ctx.Err() == nil {
				n := rng.IntN(names)
				opCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
				start := time.Now()
				if ms != nil {
					m := concurrency.NewMutex(ms[i], fmt.Sprintf("%sn%d", pfx, n))
					if err := m.Lock(opCtx); err != nil {
						if ctx.Err() == nil {
							bad["lock: "+errorKind(err)]++
						}
						cancel()
						continue
					}
					mine = append(mine, churnRecord{name: n, at: time.Now(), wait: time.Since(start)})
					for err := m.Unlock(opCtx); err != nil && opCtx.Err() == nil; err = m.Unlock(opCtx) {
						bad["unlock: "+errorKind(err)]++
					}
					cancel()
					continue
				}
				l, err := ls[i].Acquire(opCtx, fmt.Sprintf("n%d", n))
				if err != nil {
					if ctx.Err() == nil {
						bad["acquire: "+errorKind(err)]++
					}
					cancel()
					if errors.Is(err, lock.ErrSessionLost) {
						return
					}
					continue
				}
				mine = append(mine, churnRecord{name: n, token: int64(l.Token()), at: time.Now(), wait: time.Since(start)})
				for err := l.Release(opCtx); err != nil && !errors.Is(l.Err(), lock.ErrLost) && opCtx.Err() == nil; err = l.Release(opCtx) {
					bad["release: "+errorKind(err)]++
				}
				cancel()
			}
		}()
	}
	wg.Wait()
	slices.SortFunc(recs, func(a, b churnRecord) int { return a.at.Compare(b.at) })
	return recs, errs
}

// errorKind is err's message without the lock's name, to count errors by
// kind.
func errorKind(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, `": `); i >= 0 {
		return msg[i+3:]
	}
	return msg
}

// countErrors adds up errs and logs them by kind.
func countErrors(b *testing.B, errs map[string]int) int {
	n := 0
	for k, c := range errs {
		b.Logf("%5d × %s", c, k)
		n += c
	}
	return n
}

// BenchmarkScaleChurn: 200 sessions acquiring and releasing random names
// among 1,000 for SCALE_CHURN_SECONDS (default 15), beside
// concurrency.Mutex doing the same. It reports acquisitions per second and
// the acquire latency (including any wait for a holder) p50 and p99.
func BenchmarkScaleChurn(b *testing.B) {
	for _, impl := range []string{"etcdlock", "mutex"} {
		b.Run("sessions=200/names=1000/impl="+impl, func(b *testing.B) {
			for range b.N {
				benchChurn(b, impl, 200, 1000)
			}
		})
	}
}

func churnDuration() time.Duration {
	if s, err := strconv.Atoi(os.Getenv("SCALE_CHURN_SECONDS")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 15 * time.Second
}

func benchChurn(b *testing.B, impl string, sessions, names int) {
	cli := etcdtest.Client(b, benchEndpoints()...)
	pfx := fmt.Sprintf("/bench/churn/%s/%d/", impl, time.Now().UnixNano())
	ls, ms := openSessions(b, cli, impl, sessions, pfx)
	d := churnDuration()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	recs, errs := churn(ctx, ls, ms, pfx, names, 1)
	waits := make([]time.Duration, len(recs))
	for i, r := range recs {
		waits[i] = r.wait
	}
	b.ReportMetric(float64(len(recs))/d.Seconds(), "acq/s")
	b.ReportMetric(quantile(waits, 0.5), "acquire-p50-ms")
	b.ReportMetric(quantile(waits, 0.99), "acquire-p99-ms")
	b.ReportMetric(float64(countErrors(b, errs)), "errors")
}

// BenchmarkScaleLeaderKill runs the churn of BenchmarkScaleChurn
// (etcdlock) for 24 s with 50 more sessions each holding one lock
// throughout, and SIGKILLs the etcd leader's process 8 s in. It needs
// ETCDLOCK_BENCH_MEMBERS: a file of "name pid client-URL" lines (what
// etcdlock-dev --members prints after its first line); the killed member
// stays dead, so make bench-scale runs this last. It reports the longest
// time no acquisition completed after the kill (beside the longest before
// it), the holders lost (must be 0: the TTL outlasts an election), token
// regressions (acquisitions of one name whose tokens do not increase in
// the order they completed: must be 0), and the errors retried.
func BenchmarkScaleLeaderKill(b *testing.B) {
	members := os.Getenv("ETCDLOCK_BENCH_MEMBERS")
	if members == "" {
		b.Skip("needs ETCDLOCK_BENCH_MEMBERS (make bench-scale)")
	}
	if b.N > 1 {
		b.Fatal("kills a member: run with -benchtime 1x")
	}
	pids := map[string]int{}
	data, err := os.ReadFile(members)
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) == 3 {
			pid, err := strconv.Atoi(f[1])
			if err != nil {
				b.Fatalf("%s: %q: %v", members, line, err)
			}
			pids[f[2]] = pid
		}
	}
	const sessions, names, steady = 200, 1000, 50
	const runFor, killAt = 24 * time.Second, 8 * time.Second
	cli := etcdtest.Client(b, benchEndpoints()...)
	pfx := fmt.Sprintf("/bench/kill/%d/", time.Now().UnixNano())
	ls, _ := openSessions(b, cli, "etcdlock", sessions+steady, pfx)
	var held []*lock.Lock
	for i, s := range ls[sessions:] {
		l, err := s.Acquire(context.Background(), fmt.Sprintf("steady%d", i))
		if err != nil {
			b.Fatal(err)
		}
		held = append(held, l)
	}
	ctx, cancel := context.WithTimeout(context.Background(), runFor)
	defer cancel()
	start := time.Now()
	var killed time.Time
	killer := make(chan error, 1)
	go func() {
		time.Sleep(killAt)
		leader, err := leaderEndpoint(ctx, cli)
		if err == nil {
			pid, ok := pids[leader]
			if !ok {
				err = fmt.Errorf("no pid for the leader %s in %s", leader, members)
			} else {
				killed = time.Now()
				err = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		killer <- err
	}()
	recs, errs := churn(ctx, ls[:sessions], nil, pfx, names, 2)
	if err := <-killer; err != nil {
		b.Fatal(err)
	}
	// The stall counts from the kill, not from the last acquisition
	// before it.
	stallBefore, stallAfter := time.Duration(0), time.Duration(0)
	last := start
	for _, r := range recs {
		if r.at.Before(killed) {
			stallBefore = max(stallBefore, r.at.Sub(last))
		} else {
			from := last
			if from.Before(killed) {
				from = killed
			}
			stallAfter = max(stallAfter, r.at.Sub(from))
		}
		last = r.at
	}
	regressions := 0
	lastToken := map[int]int64{}
	for _, r := range recs {
		if r.token <= lastToken[r.name] {
			regressions++
		}
		lastToken[r.name] = r.token
	}
	// A steady holder's loss counts once, whether its lock or its whole
	// session ended; a churning session's loss counts once.
	lost := 0
	for _, l := range held {
		if l.Err() != nil {
			lost++
			b.Logf("steady holder %s lost: %v", l.Name(), l.Err())
		}
	}
	for _, s := range ls[:sessions] {
		if s.Err() != nil {
			lost++
			b.Logf("churning session lost: %v", s.Err())
		}
	}
	after := 0
	for _, r := range recs {
		if r.at.After(killed) {
			after++
		}
	}
	b.ReportMetric(float64(stallAfter)/float64(time.Millisecond), "stall-ms")
	b.ReportMetric(float64(stallBefore)/float64(time.Millisecond), "longest-gap-before-kill-ms")
	b.ReportMetric(float64(len(recs)-after)/killed.Sub(start).Seconds(), "acq/s-before")
	b.ReportMetric(float64(after)/start.Add(runFor).Sub(killed).Seconds(), "acq/s-after")
	b.ReportMetric(float64(lost), "lost")
	b.ReportMetric(float64(regressions), "token-regressions")
	b.ReportMetric(float64(countErrors(b, errs)), "errors")
}

// leaderEndpoint is the client URL of the member that leads.
func leaderEndpoint(ctx context.Context, cli *clientv3.Client) (string, error) {
	for _, ep := range cli.Endpoints() {
		st, err := cli.Status(ctx, ep)
		if err == nil && st.Header.MemberId == st.Leader {
			return ep, nil
		}
	}
	return "", errors.New("no member reports itself the leader")
}

// BenchmarkScaleRevisions: what acquisitions cost etcd's store. It runs
// SCALE_REVISION_ACQUISITIONS (default 100,000) acquire-release cycles,
// 64 sessions over 1,024 names, against a fresh single-member etcd in this
// process (fsync off: the store's size does not depend on it), without
// auto-compaction and with periodic auto-compaction of 2 s, while 8 more
// sessions queue on one hot name. It reports revisions per acquisition
// and the DB's size and in-use size per million acquisitions, and fails if
// a waiter on the hot name misses a release across a compaction.
func BenchmarkScaleRevisions(b *testing.B) {
	for _, mode := range []string{"off", "periodic-2s"} {
		b.Run("compaction="+mode, func(b *testing.B) {
			for range b.N {
				benchRevisions(b, mode)
			}
		})
	}
}

func benchRevisions(b *testing.B, mode string) {
	total := 100000
	if n, err := strconv.Atoi(os.Getenv("SCALE_REVISION_ACQUISITIONS")); err == nil && n > 0 {
		total = n
	}
	opts := []embedded.Option{embedded.WithUnsafeNoFsync()}
	if mode != "off" {
		opts = append(opts, embedded.WithConfig(func(cfg *embed.Config) {
			cfg.AutoCompactionMode = "periodic"
			cfg.AutoCompactionRetention = "2s"
		}))
	}
	c := etcdtest.Cluster(b, opts...)
	ep := c.Endpoints()[0]
	cli := etcdtest.Client(b, ep)
	ctx := context.Background()
	st0, err := cli.Status(ctx, ep)
	if err != nil {
		b.Fatal(err)
	}
	pfx := "/bench/revisions/"
	ls, _ := openSessions(b, cli, "etcdlock", 64+8, pfx)
	var (
		mu    sync.Mutex
		count int
		wg    sync.WaitGroup
	)
	for i, s := range ls[:64] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := i; ; n += 64 {
				mu.Lock()
				count++
				done := count > total
				mu.Unlock()
				if done {
					return
				}
				l, err := s.Acquire(ctx, fmt.Sprintf("n%d", n%1024))
				if err != nil {
					b.Error(err)
					return
				}
				if err := l.Release(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	// The hot name's waiters hold for 20 ms each, so most of their time is
	// spent waiting while the store is compacted under them.
	hot, stop := 0, make(chan struct{})
	var longest time.Duration
	var hw sync.WaitGroup
	for _, s := range ls[64:] {
		hw.Add(1)
		go func() {
			defer hw.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				start := time.Now()
				l, err := s.Acquire(wctx, "hot")
				cancel()
				if err != nil {
					b.Errorf("a waiter on the hot name: %v", err)
					return
				}
				mu.Lock()
				hot++
				longest = max(longest, time.Since(start))
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
				if err := l.Release(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	hw.Wait()
	st1, err := cli.Status(ctx, ep)
	if err != nil {
		b.Fatal(err)
	}
	// A read at the run's middle revision fails once it was compacted.
	_, err = cli.Get(ctx, "x", clientv3.WithRev((st0.Header.Revision+st1.Header.Revision)/2))
	b.Logf("compaction %s: the run's middle revision compacted: %v; hot-name acquisitions %d, longest wait %v",
		mode, errors.Is(err, rpctypes.ErrCompacted), hot, longest)
	acquisitions := float64(total + hot) // the hot name's count too: each cost the store the same
	perMillion := 1e6 / acquisitions / (1 << 20)
	b.ReportMetric(float64(st1.Header.Revision-st0.Header.Revision)/acquisitions, "revisions/acq")
	b.ReportMetric(float64(st1.DbSize-st0.DbSize)*perMillion, "db-MB/M-acq")
	b.ReportMetric(float64(st1.DbSizeInUse-st0.DbSizeInUse)*perMillion, "db-in-use-MB/M-acq")
	b.ReportMetric(float64(hot), "hot-acquisitions")
	b.ReportMetric(longest.Seconds(), "hot-longest-wait-s")
}
