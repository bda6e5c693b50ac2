package kubelock

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"

	"github.com/etcdlock/etcdlock/pkg/lock"
)

// An elector with ReleaseOnCancel false that stops leading leaves the
// record in etcd under its live lease, as client-go's Lease lock leaves
// its Lease to expire: the term's context has ended, the record has not,
// also after the lock is closed.
func TestNotReleasedRecordStaysUntilItsTTL(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	a := newLock(t, cli, "a", lock.WithTTL(10*time.Second))
	tokens := make(chan fencing.Token, 1)
	stop := runElector(t, leaderelection.LeaderElectionConfig{
		Lock: a, LeaseDuration: 8 * time.Second, RenewDeadline: 5 * time.Second, RetryPeriod: 500 * time.Millisecond,
		ReleaseOnCancel: false,
		Name:            "ctl",
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: a.Lead(func(ctx context.Context, term Term) { tokens <- term.Token(); <-ctx.Done() }),
			OnStoppedLeading: func() {},
		},
	})
	<-tokens
	term := mustTerm(t, a)
	stop()
	ctx := ctxT(t)
	if err := a.Close(ctx); err != nil { // waits for the lock's revokes
		t.Fatal(err)
	}
	if term.Context().Err() == nil {
		t.Error("the term is still live after the elector stopped leading")
	}
	resp, err := cli.Get(ctx, a.Key())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 {
		t.Fatal("the record is gone although the elector did not release it")
	}
	ttl, err := cli.TimeToLive(ctx, mustLease(t, resp.Kvs[0].Lease))
	if err != nil {
		t.Fatal(err)
	}
	if ttl.TTL <= 0 {
		t.Errorf("the record's lease has TTL %d, want it alive", ttl.TTL)
	}
}
