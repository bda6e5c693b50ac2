package lock_test

import (
	"context"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// BenchmarkUncontended measures one acquire+release cycle on one session,
// side by side on the same embedded etcd (fsync on): etcdlock, etcd's
// concurrency.Mutex, and the floor — one Txn put plus one delete, which is
// the least any etcd lock can do.
func BenchmarkUncontended(b *testing.B) {
	ctx := context.Background()
	cli := etcdtest.Client(b, cluster.Endpoints()...)

	b.Run("impl=etcdlock", func(b *testing.B) {
		s, err := lock.NewSession(ctx, cli, lock.WithPrefix("/bench/etcdlock/"))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close(ctx)
		for b.Loop() {
			l, err := s.Acquire(ctx, "x")
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=mutex", func(b *testing.B) {
		s, err := concurrency.NewSession(cli)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		m := concurrency.NewMutex(s, "/bench/mutex/x")
		for b.Loop() {
			if err := m.Lock(ctx); err != nil {
				b.Fatal(err)
			}
			if err := m.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=floor", func(b *testing.B) {
		lease, err := cli.Grant(ctx, 60)
		if err != nil {
			b.Fatal(err)
		}
		defer cli.Revoke(ctx, lease.ID)
		const key = "/bench/floor/x"
		for b.Loop() {
			if _, err := cli.Txn(ctx).
				If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
				Then(clientv3.OpPut(key, "", clientv3.WithLease(lease.ID))).
				Commit(); err != nil {
				b.Fatal(err)
			}
			if _, err := cli.Delete(ctx, key); err != nil {
				b.Fatal(err)
			}
		}
	})
}
