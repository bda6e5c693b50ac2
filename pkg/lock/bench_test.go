package lock_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// BenchmarkUncontended measures one acquire+release cycle on one session:
// etcdlock, etcd's concurrency.Mutex, and the floor — one Txn put plus one
// delete, the least any etcd lock can do — on the same embedded etcd (fsync
// on). The three take turns cycle by cycle, in a shuffled order, so that
// the machine's and etcd's slow moments (fsync stalls, snapshots, the other
// core's load) fall on all three alike. ns/op is one round of all three;
// each one's median cycle is reported as <impl>-ns/cycle, with the ratios.
func BenchmarkUncontended(b *testing.B) {
	ctx := context.Background()
	cli := etcdtest.Client(b, cluster.Endpoints()...)

	s, err := lock.NewSession(ctx, cli, lock.WithPrefix("/bench/etcdlock/"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(ctx)
	cs, err := concurrency.NewSession(cli)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	m := concurrency.NewMutex(cs, "/bench/mutex/x")
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Revoke(ctx, lease.ID)
	const floorKey = "/bench/floor/x"

	impls := []benchImpl{
		{"etcdlock", func() error {
			l, err := s.Acquire(ctx, "x")
			if err != nil {
				return err
			}
			return l.Release(ctx)
		}},
		{"mutex", func() error {
			if err := m.Lock(ctx); err != nil {
				return err
			}
			return m.Unlock(ctx)
		}},
		{"floor", func() error {
			if _, err := cli.Txn(ctx).
				If(clientv3.Compare(clientv3.CreateRevision(floorKey), "=", 0)).
				Then(clientv3.OpPut(floorKey, "", clientv3.WithLease(lease.ID))).
				Commit(); err != nil {
				return err
			}
			_, err := cli.Delete(ctx, floorKey)
			return err
		}},
	}
	med := benchInTurns(b, impls)
	b.ReportMetric(med[0]/med[1], "x-mutex")
	b.ReportMetric(med[0]/med[2], "x-floor")
}

// benchImpl is one implementation's acquire+release cycle.
type benchImpl struct {
	name  string
	cycle func() error
}

// benchInTurns runs impls in turn, cycle by cycle, in a new order every
// round (a seeded shuffle), and reports and returns each one's median
// cycle in ns. A fixed rotation would give each its own predecessor in
// every round but one, and what a predecessor leaves etcd doing (a burst
// of writes to apply, a batch to commit) would fall on one contender
// only.
func benchInTurns(b *testing.B, impls []benchImpl) []float64 {
	times := make([][]time.Duration, len(impls))
	rng := rand.New(rand.NewPCG(1, 2))
	order := make([]int, len(impls))
	for i := range order {
		order[i] = i
	}
	for b.Loop() {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, i := range order {
			start := time.Now()
			if err := impls[i].cycle(); err != nil {
				b.Fatalf("%s: %v", impls[i].name, err)
			}
			times[i] = append(times[i], time.Since(start))
		}
	}
	med := make([]float64, len(impls))
	for i, impl := range impls {
		slices.Sort(times[i])
		med[i] = float64(times[i][len(times[i])/2].Nanoseconds())
		b.ReportMetric(med[i], impl.name+"-ns/cycle")
	}
	return med
}

// BenchmarkUncontendedBeyond measures one uncontended acquire+release
// cycle of each primitive beyond the mutex, beside the plain lock and
// concurrency.Mutex, taking turns as BenchmarkUncontended does: a
// semaphore (limit 4), a reader, a lock with a lock-delay, AcquireAll of
// three names beside three Acquire calls and three concurrency.Mutex.
func BenchmarkUncontendedBeyond(b *testing.B) {
	ctx := context.Background()
	cli := etcdtest.Client(b, cluster.Endpoints()...)
	session := func(opts ...lock.SessionOption) *lock.Session {
		s, err := lock.NewSession(ctx, cli, append([]lock.SessionOption{lock.WithPrefix("/bench/beyond/")}, opts...)...)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close(ctx) })
		return s
	}
	s, sd := session(), session(lock.WithLockDelay(time.Second))
	cs, err := concurrency.NewSession(cli)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	mutexes := []*concurrency.Mutex{concurrency.NewMutex(cs, "/bench/beyond-mutex/a"), concurrency.NewMutex(cs, "/bench/beyond-mutex/b"), concurrency.NewMutex(cs, "/bench/beyond-mutex/c")}
	one := func(s *lock.Session, name string, opts ...lock.AcquireOption) func() error {
		return func() error {
			l, err := s.Acquire(ctx, name, opts...)
			if err != nil {
				return err
			}
			return l.Release(ctx)
		}
	}
	impls := []benchImpl{
		{"lock", one(s, "x")},
		{"mutex", func() error {
			if err := mutexes[0].Lock(ctx); err != nil {
				return err
			}
			return mutexes[0].Unlock(ctx)
		}},
		{"semaphore", one(s, "sem", lock.WithLimit(4))},
		{"reader", one(s, "rw", lock.WithShared())},
		{"lockdelay", one(sd, "ld")},
		{"acquireall3", func() error {
			l, err := s.AcquireAll(ctx, []string{"a", "b", "c"})
			if err != nil {
				return err
			}
			return l.Release(ctx)
		}},
		{"lock3", func() error {
			var ls []*lock.Lock
			for _, n := range []string{"d", "e", "f"} {
				l, err := s.Acquire(ctx, n)
				if err != nil {
					return err
				}
				ls = append(ls, l)
			}
			for _, l := range ls {
				if err := l.Release(ctx); err != nil {
					return err
				}
			}
			return nil
		}},
		{"mutex3", func() error {
			for _, m := range mutexes {
				if err := m.Lock(ctx); err != nil {
					return err
				}
			}
			for _, m := range mutexes {
				if err := m.Unlock(ctx); err != nil {
					return err
				}
			}
			return nil
		}},
	}
	med := benchInTurns(b, impls)
	for i, name := range []string{"semaphore", "reader", "lockdelay"} {
		b.ReportMetric(med[2+i]/med[0], name+"-x-lock")
	}
	b.ReportMetric(med[5]/med[6], "acquireall3-x-lock3")
	b.ReportMetric(med[5]/med[7], "acquireall3-x-mutex3")
}
