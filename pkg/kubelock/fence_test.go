package kubelock

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/fencing/etcdfence"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// etcdfence refuses an old term's token on the record's key and names the
// election's present term, or none, as Current: not another election's
// record, nor a term count, that is older under the same prefix.
func TestFencedWriteNamesThePresentTerm(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	ctx := ctxT(t)
	other, err := New(cli, "other", "o", testTimings.elector(), lock.WithPrefix(prefix(t)), lock.WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	if err := other.Create(ctx, record("o")); err != nil {
		t.Fatal(err)
	}
	a := newLock(t, cli, "a")
	if err := a.Create(ctx, record("a")); err != nil {
		t.Fatal(err)
	}
	first := mustTerm(t, a).Token()
	if err := a.Update(ctx, released()); err != nil {
		t.Fatal(err)
	}
	current := func() fencing.Token {
		t.Helper()
		_, err := etcdfence.Commit(ctx, cli, a.Key(), first, clientv3.OpPut(prefix(t)+"data", "stale"))
		var stale *fencing.StaleTokenError
		if !errors.As(err, &stale) {
			t.Fatalf("Commit with the first term's token = %v, want a StaleTokenError", err)
		}
		return stale.Current
	}
	if got := current(); got != 0 {
		t.Errorf("no term: Current = %d, want 0", got)
	}
	if err := a.Create(ctx, record("a")); err != nil {
		t.Fatal(err)
	}
	second := mustTerm(t, a).Token()
	if got := current(); got != second || second <= first {
		t.Errorf("Current = %d, want the second term's %d (the first's was %d)", got, second, first)
	}
}
