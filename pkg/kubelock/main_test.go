package kubelock

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/kubelock/internal/kubetest"

	"github.com/etcdlock/etcdlock/pkg/lock"
)

// cluster is a 3-member etcd shared by the package's tests, each under its
// own prefix.
var cluster *etcdtest.Shared

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m, &cluster)) }

func prefix(t testing.TB) string {
	return "/kube/" + strings.ReplaceAll(t.Name(), "/", "_") + "/"
}

// newLock returns a lock of the election "ctl" under the test's prefix,
// for testTimings, closed when the test ends.
func newLock(t testing.TB, cli *clientv3.Client, identity string, opts ...lock.SessionOption) *Lock {
	t.Helper()
	return newLockFor(t, cli, identity, testTimings.elector(), opts...)
}

// newLockFor is newLock for an elector with timings tm.
func newLockFor(t testing.TB, cli *clientv3.Client, identity string, tm Timings, opts ...lock.SessionOption) *Lock {
	t.Helper()
	opts = append([]lock.SessionOption{lock.WithPrefix(prefix(t)), lock.WithTTL(2 * time.Second),
		lock.WithLogger(zaptest.NewLogger(t).Named(identity))}, opts...)
	l, err := New(cli, "ctl", identity, tm, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = l.Close(ctx)
	})
	return l
}

// record is what client-go's elector writes for identity.
func record(identity string) rl.LeaderElectionRecord {
	now := metav1.NewTime(time.Now())
	return rl.LeaderElectionRecord{HolderIdentity: identity, LeaseDurationSeconds: 15, AcquireTime: now, RenewTime: now}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustTerm(t testing.TB, l *Lock) Term {
	t.Helper()
	term, err := l.Term()
	if err != nil {
		t.Fatal(err)
	}
	return term
}

// create starts a term of l with l's identity as holder.
func create(t testing.TB, ctx context.Context, l *Lock) Term {
	t.Helper()
	if err := l.Create(ctx, record(l.Identity())); err != nil {
		t.Fatal(err)
	}
	return mustTerm(t, l)
}

// waitEnded waits for term to end and returns its cause.
func waitEnded(t testing.TB, term Term, within time.Duration) error {
	t.Helper()
	select {
	case <-term.Context().Done():
		return context.Cause(term.Context())
	case <-time.After(within):
		t.Fatalf("term %v still running after %v", term.Token(), within)
		return nil
	}
}

func mustLease(t testing.TB, id int64) clientv3.LeaseID {
	t.Helper()
	if id == 0 {
		t.Fatal("no lease")
	}
	return clientv3.LeaseID(id)
}
