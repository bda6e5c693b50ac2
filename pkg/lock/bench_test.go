package lock_test

import (
	"context"
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
// on). The three take turns cycle by cycle, in a rotating order, so that
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

	impls := []struct {
		name  string
		cycle func() error
	}{
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
	times := make([][]time.Duration, len(impls))
	round := 0
	for b.Loop() {
		for j := range impls {
			i := (round + j) % len(impls)
			start := time.Now()
			if err := impls[i].cycle(); err != nil {
				b.Fatalf("%s: %v", impls[i].name, err)
			}
			times[i] = append(times[i], time.Since(start))
		}
		round++
	}
	med := make([]float64, len(impls))
	for i, impl := range impls {
		slices.Sort(times[i])
		med[i] = float64(times[i][len(times[i])/2].Nanoseconds())
		b.ReportMetric(med[i], impl.name+"-ns/cycle")
	}
	b.ReportMetric(med[0]/med[1], "x-mutex")
	b.ReportMetric(med[0]/med[2], "x-floor")
}
