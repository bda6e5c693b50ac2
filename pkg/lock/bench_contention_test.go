package lock_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

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
	s *lock.Session
	l *lock.Lock
}

func (e *etcdlockLocker) lock(ctx context.Context) (err error) {
	e.l, err = e.s.Acquire(ctx, "h")
	return err
}
func (e *etcdlockLocker) unlock(ctx context.Context) error { return e.l.Release(ctx) }

type mutexLocker struct{ m *concurrency.Mutex }

func (m *mutexLocker) lock(ctx context.Context) error   { return m.m.Lock(ctx) }
func (m *mutexLocker) unlock(ctx context.Context) error { return m.m.Unlock(ctx) }

// BenchmarkHandoff measures, with N contenders looping on one name, the
// time from a holder's release reply to the next holder being active, and
// the watch events etcd sends per handoff (1 means one waiter woken).
func BenchmarkHandoff(b *testing.B) {
	for _, waiters := range []int{8, 64} {
		for _, impl := range []string{"etcdlock", "mutex"} {
			b.Run(fmt.Sprintf("waiters=%d/impl=%s", waiters, impl), func(b *testing.B) {
				benchHandoff(b, impl, waiters)
			})
		}
	}
}

func benchHandoff(b *testing.B, impl string, n int) {
	ctx := context.Background()
	cli := etcdtest.Client(b, cluster.Endpoints()...)
	pfx := fmt.Sprintf("/bench/handoff/%s/%d/%d/", impl, n, time.Now().UnixNano())
	lockers := make([]locker, n)
	for i := range lockers {
		switch impl {
		case "etcdlock":
			s, err := lock.NewSession(ctx, cli, lock.WithPrefix(pfx))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close(ctx)
			lockers[i] = &etcdlockLocker{s: s}
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
	}
}

// BenchmarkThroughput: G goroutines acquire and release over K names, next
// to the same concurrency of raw Txn puts and deletes (the floor).
func BenchmarkThroughput(b *testing.B) {
	for _, gk := range [][2]int{{64, 64}, {256, 1024}} {
		for _, impl := range []string{"etcdlock", "raw"} {
			b.Run(fmt.Sprintf("G=%d/K=%d/impl=%s", gk[0], gk[1], impl), func(b *testing.B) {
				benchThroughput(b, impl, gk[0], gk[1])
			})
		}
	}
}

func benchThroughput(b *testing.B, impl string, g, k int) {
	ctx := context.Background()
	cli := etcdtest.Client(b, cluster.Endpoints()...)
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
	if impl == "etcdlock" {
		for i := range sessions {
			s, err := lock.NewSession(ctx, cli, lock.WithPrefix(pfx))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close(ctx)
			sessions[i] = s
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
	eps := cluster.Endpoints()
	if env := os.Getenv("ETCDLOCK_BENCH_ENDPOINTS"); env != "" {
		eps = strings.Split(env, ",")
	} else {
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
