//go:build surface

package lock_test

import (
	"context"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/etcdlock/etcdlock/pkg/lock"
)

// TestContendedAcquirePath runs, for hack/surface's coverage profiles, one
// contended acquisition of a plain lock ($ETCDLOCK_PATH=lock) or of a
// concurrency.Mutex (mutex), each waiting behind a key written by plain
// etcd calls and deleted the same way, so that only the waiter's code
// runs. With $ETCDLOCK_PATH_BASE set it does all but the acquisition: the
// difference between the two profiles is what the acquisition ran. Either
// way it ends the process as the acquisition returns (os.Exit, whose exit
// hooks write a -cover build's counters to $GOCOVERDIR), so that no
// clean-up runs in either: hack/surface runs the test binary itself, as
// go test makes os.Exit(0) in a test a failure.
func TestContendedAcquirePath(t *testing.T) {
	ctx, cli := testCtx(t), client(t)
	base := os.Getenv("ETCDLOCK_PATH_BASE") != ""
	switch os.Getenv("ETCDLOCK_PATH") {
	case "lock":
		// The default options but for the prefix and the TTL: no renewal
		// while it waits, and the default logger, which drops the debug
		// lines newSession's test logger would have built.
		s, err := lock.NewSession(ctx, cli, lock.WithPrefix(prefix(t)), lock.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		contend(t, cli, namePrefix(t, prefix(t), "job"), base, func() {
			if _, err := s.Acquire(ctx, "job"); err != nil {
				t.Fatal(err)
			}
		})
	case "mutex":
		cs, err := concurrency.NewSession(cli, concurrency.WithTTL(60))
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		m := concurrency.NewMutex(cs, prefix(t)+"mutex/")
		contend(t, cli, prefix(t)+"mutex/", base, func() {
			if err := m.Lock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	default:
		t.Fatal("ETCDLOCK_PATH says what to run, lock or mutex: run it with hack/surface")
	}
}

// contend holds pfx with a key of its own and, unless base, runs acquire,
// which must wait for it; the key is deleted once a second key is queued.
func contend(t *testing.T, cli *clientv3.Client, pfx string, base bool, acquire func()) {
	t.Helper()
	ctx := testCtx(t)
	g, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	holder := pfx + "holder"
	if _, err := cli.Put(ctx, holder, "", clientv3.WithLease(g.ID)); err != nil {
		t.Fatal(err)
	}
	if base {
		os.Exit(0)
	}
	go func() {
		for {
			r, err := cli.Get(ctx, pfx, clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err != nil || r.Count == 2 {
				time.Sleep(50 * time.Millisecond) // the waiter watches its predecessor
				_, _ = cli.Delete(context.WithoutCancel(ctx), holder)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	acquire()
	os.Exit(0)
}
