package lock_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// watchEvents reads how many watch events the embedded etcd servers have
// sent so far (etcd_debugging_mvcc_events_total, on the default registry
// the in-process servers register with).
func watchEvents(b *testing.B) float64 {
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		b.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() == "etcd_debugging_mvcc_events_total" {
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// locker is one contender's acquire/release, for either implementation.
type locker interface {
	lock(ctx context.Context) error
	unlock(ctx context.Context) error
}

type etcdlockLocker struct {
	s    *lock.Session
	l    *lock.Lock
	opts []lock.AcquireOption
}

func (e *etcdlockLocker) lock(ctx context.Context) (err error) {
	e.l, err = e.s.Acquire(ctx, "h", e.opts...)
	return err
}

// rpcCounter counts the KV requests a client sends: reads (Range, and
// Txn without a write) and writes; and, among the writes, the failed slot
// claims: transactions that could write a semaphore's slot key but wrote
// nothing (a claim that lost every slot it tried to other contenders),
// and apart from them the probes that found keys: such transactions whose
// Else only reads (a semaphore's first transaction on a name it expected
// free, which then reads the name).
type rpcCounter struct{ reads, writes, failedClaims, probes atomic.Int64 }

func (c *rpcCounter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	switch r := req.(type) {
	case *etcdserverpb.RangeRequest:
		c.reads.Add(1)
	case *etcdserverpb.TxnRequest:
		if !txnWrites(r) {
			c.reads.Add(1)
			break
		}
		c.writes.Add(1)
		err := invoker(ctx, method, req, reply, cc, opts...)
		if resp, ok := reply.(*etcdserverpb.TxnResponse); ok && err == nil && putsSlot(r) && !wrote(r, resp) {
			if elseOnlyReads(r) {
				c.probes.Add(1)
			} else {
				c.failedClaims.Add(1)
			}
		}
		return err
	case *etcdserverpb.PutRequest, *etcdserverpb.DeleteRangeRequest:
		c.writes.Add(1)
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// elseOnlyReads reports whether r has an Else and it writes nothing: the
// shape of a semaphore's probe (a first transaction that only reads when
// the name has keys).
func elseOnlyReads(r *etcdserverpb.TxnRequest) bool {
	return len(r.Failure) > 0 && !txnWrites(&etcdserverpb.TxnRequest{Failure: r.Failure})
}

// putsSlot reports whether r, in any branch, puts a semaphore's slot key.
func putsSlot(r *etcdserverpb.TxnRequest) bool {
	for _, op := range slices.Concat(r.Success, r.Failure) {
		if p := op.GetRequestPut(); p != nil && strings.Contains(string(p.Key), "%slot/") {
			return true
		}
		if t := op.GetRequestTxn(); t != nil && putsSlot(t) {
			return true
		}
	}
	return false
}

// wrote reports whether the branches of r that etcd took, as resp says,
// wrote anything.
func wrote(r *etcdserverpb.TxnRequest, resp *etcdserverpb.TxnResponse) bool {
	ops := r.Failure
	if resp.Succeeded {
		ops = r.Success
	}
	for i, op := range ops {
		switch o := op.Request.(type) {
		case *etcdserverpb.RequestOp_RequestPut, *etcdserverpb.RequestOp_RequestDeleteRange:
			return true
		case *etcdserverpb.RequestOp_RequestTxn:
			if wrote(o.RequestTxn, resp.Responses[i].GetResponseTxn()) {
				return true
			}
		}
	}
	return false
}

func txnWrites(r *etcdserverpb.TxnRequest) bool {
	for _, ops := range [][]*etcdserverpb.RequestOp{r.Success, r.Failure} {
		for _, op := range ops {
			switch o := op.Request.(type) {
			case *etcdserverpb.RequestOp_RequestPut, *etcdserverpb.RequestOp_RequestDeleteRange:
				return true
			case *etcdserverpb.RequestOp_RequestTxn:
				if txnWrites(o.RequestTxn) {
					return true
				}
			}
		}
	}
	return false
}

// countingClient is a client of endpoints (default: the test cluster)
// whose KV requests c counts.
func countingClient(tb testing.TB, c *rpcCounter, endpoints ...string) *clientv3.Client {
	if len(endpoints) == 0 {
		endpoints = cluster.Endpoints()
	}
	return interceptedClient(tb, endpoints, c.intercept)
}

// interceptedClient is a client of endpoints whose unary requests go
// through intercept, closed when tb ends.
func interceptedClient(tb testing.TB, endpoints []string, intercept grpc.UnaryClientInterceptor) *clientv3.Client {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(intercept)}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cli.Close() })
	return cli
}

func (e *etcdlockLocker) unlock(ctx context.Context) error { return e.l.Release(ctx) }

type mutexLocker struct{ m *concurrency.Mutex }

func (m *mutexLocker) lock(ctx context.Context) error   { return m.m.Lock(ctx) }
func (m *mutexLocker) unlock(ctx context.Context) error { return m.m.Unlock(ctx) }

// BenchmarkHandoff measures, with N contenders looping on one name, the
// time from a holder's release reply to the next holder being active, the
// watch events etcd sends per handoff (1 means one waiter woken), and the
// reads and writes the contenders send per acquire-release cycle. impl
// semaphore is a WithLimit(4) semaphore: N contenders, 4 holders at once,
// each release letting one waiter in; impl readers is WithShared, where no
// one waits and ns/op is the cycle's cost at that concurrency.
func BenchmarkHandoff(b *testing.B) {
	for _, waiters := range []int{8, 64} {
		for _, impl := range []string{"etcdlock", "semaphore", "readers", "mutex"} {
			b.Run(fmt.Sprintf("waiters=%d/impl=%s", waiters, impl), func(b *testing.B) {
				benchHandoff(b, impl, waiters)
			})
		}
	}
}

func benchHandoff(b *testing.B, impl string, n int) {
	ctx := context.Background()
	var rpcs rpcCounter
	cli := countingClient(b, &rpcs)
	pfx := fmt.Sprintf("/bench/handoff/%s/%d/%d/", impl, n, time.Now().UnixNano())
	lockers := make([]locker, n)
	for i := range lockers {
		switch impl {
		case "etcdlock", "semaphore", "readers":
			s, err := lock.NewSession(ctx, cli, lock.WithPrefix(pfx))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close(ctx)
			lockers[i] = &etcdlockLocker{s: s}
			switch impl {
			case "semaphore":
				lockers[i].(*etcdlockLocker).opts = []lock.AcquireOption{lock.WithLimit(4)}
			case "readers":
				lockers[i].(*etcdlockLocker).opts = []lock.AcquireOption{lock.WithShared()}
			}
		default:
			s, err := concurrency.NewSession(cli)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			lockers[i] = &mutexLocker{concurrency.NewMutex(s, pfx+"h")}
		}
	}
	var (
		mu        sync.Mutex
		released  time.Time // when the last release reply arrived
		total     time.Duration
		handoffs  int
		remaining = b.N
		wg        sync.WaitGroup
	)
	events0 := watchEvents(b)
	reads0, writes0, failed0, probes0 := rpcs.reads.Load(), rpcs.writes.Load(), rpcs.failedClaims.Load(), rpcs.probes.Load()
	b.ResetTimer()
	for _, l := range lockers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if err := l.lock(ctx); err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				if !released.IsZero() {
					total += time.Since(released)
					handoffs++
				}
				remaining--
				done := remaining < 0
				mu.Unlock()
				runtime.Gosched()
				if err := l.unlock(ctx); err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				released = time.Now()
				mu.Unlock()
				if done {
					return
				}
			}
		}()
		if remaining <= 0 {
			break
		}
	}
	wg.Wait()
	b.StopTimer()
	if handoffs > 0 {
		b.ReportMetric(float64(total.Nanoseconds())/float64(handoffs), "ns/handoff")
		b.ReportMetric((watchEvents(b)-events0)/float64(b.N), "events/op")
		b.ReportMetric(float64(rpcs.reads.Load()-reads0)/float64(b.N), "reads/op")
		b.ReportMetric(float64(rpcs.writes.Load()-writes0)/float64(b.N), "writes/op")
		if impl == "semaphore" {
			b.ReportMetric(float64(rpcs.failedClaims.Load()-failed0)/float64(b.N), "failedclaims/op")
			b.ReportMetric(float64(rpcs.probes.Load()-probes0)/float64(b.N), "probes/op")
		}
	}
}

// benchEndpoints are ETCDLOCK_BENCH_ENDPOINTS (comma-separated: an etcd in
// other processes, as make bench and make bench-scale start), else the
// embedded etcd of this process.
func benchEndpoints() []string {
	if env := os.Getenv("ETCDLOCK_BENCH_ENDPOINTS"); env != "" {
		return strings.Split(env, ",")
	}
	return cluster.Endpoints()
}

// BenchmarkThroughput: G goroutines acquire and release over K names, next
// to concurrency.Mutex at the same concurrency and names (one session per
// goroutine, as for etcdlock) and the same concurrency of raw Txn puts and
// deletes (the floor). With ETCDLOCK_BENCH_ENDPOINTS it runs against that
// etcd (make bench-scale: a 3-member cluster of separate processes).
func BenchmarkThroughput(b *testing.B) {
	for _, gk := range [][2]int{{64, 64}, {256, 1024}} {
		for _, impl := range []string{"etcdlock", "mutex", "raw"} {
			b.Run(fmt.Sprintf("G=%d/K=%d/impl=%s", gk[0], gk[1], impl), func(b *testing.B) {
				benchThroughput(b, impl, gk[0], gk[1])
			})
		}
	}
}

func benchThroughput(b *testing.B, impl string, g, k int) {
	ctx := context.Background()
	cli := etcdtest.Client(b, benchEndpoints()...)
	pfx := fmt.Sprintf("/bench/tp/%s/%d/", impl, time.Now().UnixNano())
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Revoke(ctx, lease.ID)
	var next sync.Mutex
	count := 0
	take := func() (int, bool) {
		next.Lock()
		defer next.Unlock()
		count++
		return count, count <= b.N
	}
	// Sessions are set up before the clock starts, as the raw lease is.
	sessions := make([]*lock.Session, g)
	mutexSessions := make([]*concurrency.Session, g)
	switch impl {
	case "etcdlock":
		for i := range sessions {
			s, err := lock.NewSession(ctx, cli, lock.WithPrefix(pfx))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close(ctx)
			sessions[i] = s
		}
	case "mutex":
		for i := range mutexSessions {
			s, err := concurrency.NewSession(cli)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			mutexSessions[i] = s
		}
	}
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n, ok := take()
				if !ok {
					return
				}
				name := fmt.Sprintf("n%d", (n*7919+i)%k)
				if s != nil {
					l, err := s.Acquire(ctx, name)
					if err != nil {
						b.Error(err)
						return
					}
					if err := l.Release(ctx); err != nil {
						b.Error(err)
						return
					}
					continue
				}
				if ms := mutexSessions[i]; ms != nil {
					m := concurrency.NewMutex(ms, pfx+name)
					if err := m.Lock(ctx); err != nil {
						b.Error(err)
						return
					}
					if err := m.Unlock(ctx); err != nil {
						b.Error(err)
						return
					}
					continue
				}
				key := fmt.Sprintf("%s%s/%d", pfx, name, i)
				if _, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
					Then(clientv3.OpPut(key, "", clientv3.WithLease(lease.ID))).Commit(); err != nil {
					b.Error(err)
					return
				}
				if _, err := cli.Delete(ctx, key); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "acq/s")
}

// BenchmarkMemoryPerLock: one session holding 10,000 locks, next to one
// concurrency.Session holding 10,000 concurrency.Mutexes. It reports the
// client's heap and goroutines per held lock. Set ETCDLOCK_BENCH_ENDPOINTS
// to an etcd in another process (make bench does): with the embedded etcd
// of this process, heap-B/lock also counts the server's memory per key and
// per watch.
func BenchmarkMemoryPerLock(b *testing.B) {
	const locks = 10000
	eps := benchEndpoints()
	if os.Getenv("ETCDLOCK_BENCH_ENDPOINTS") == "" {
		b.Log("etcd runs in this process: heap-B/lock includes the server's share")
	}
	for _, impl := range []string{"etcdlock", "mutex"} {
		b.Run("impl="+impl, func(b *testing.B) {
			ctx := context.Background()
			cli := etcdtest.Client(b, eps...)
			for range b.N {
				pfx := fmt.Sprintf("/bench/mem/%s/%d/", impl, time.Now().UnixNano())
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				g0 := runtime.NumGoroutine()
				var held []any
				var closeSession func()
				if impl == "etcdlock" {
					s, err := lock.NewSession(ctx, cli, lock.WithPrefix(pfx))
					if err != nil {
						b.Fatal(err)
					}
					closeSession = func() { s.Close(ctx) }
					for i := range locks {
						l, err := s.Acquire(ctx, fmt.Sprintf("l%d", i))
						if err != nil {
							b.Fatal(err)
						}
						held = append(held, l)
					}
				} else {
					s, err := concurrency.NewSession(cli)
					if err != nil {
						b.Fatal(err)
					}
					closeSession = func() { s.Close() }
					for i := range locks {
						m := concurrency.NewMutex(s, fmt.Sprintf("%sl%d", pfx, i))
						if err := m.Lock(ctx); err != nil {
							b.Fatal(err)
						}
						held = append(held, m)
					}
				}
				time.Sleep(time.Second) // let the watches settle
				runtime.GC()
				runtime.ReadMemStats(&after)
				g1 := runtime.NumGoroutine()
				b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/locks, "heap-B/lock")
				b.ReportMetric(float64(g1-g0)/locks, "goroutines/lock")
				runtime.KeepAlive(held)
				closeSession()
			}
		})
	}
}
