package kubelock

import (
	"context"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/pkg/embedded"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
)

// A leader whose client starts on a member that is then cut off from the
// rest of the cluster keeps its term through the others, renewing as
// client-go does: a renewal request held by the cut-off member is given
// up in time for another attempt on another endpoint.
func TestTermSurvivesAMemberCutOff(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	c := etcdtest.Cluster(t, embedded.WithMembers(3), embedded.WithRaftTiming(50*time.Millisecond, 500*time.Millisecond))
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var cut *embedded.Member
	for _, m := range c.Members() {
		if m != leader {
			cut = m
			break
		}
	}
	cli := etcdtest.Client(t, cut.Endpoint())
	a := newLock(t, cli, "a")
	term := create(t, ctx, a)
	cli.SetEndpoints(c.Endpoints()...)
	e := cut.Etcd().Server
	for _, o := range c.Members() {
		if o != cut {
			e.CutPeer(o.Etcd().Server.MemberID())
			o.Etcd().Server.CutPeer(e.MemberID())
			defer func() {
				e.MendPeer(o.Etcd().Server.MemberID())
				o.Etcd().Server.MendPeer(e.MemberID())
			}()
		}
	}
	// client-go's leader: an Update every RetryPeriod, failures retried.
	for end := time.Now().Add(3 * testTimings.ttl); time.Now().Before(end); {
		if err := a.Update(ctx, record("a")); err != nil {
			t.Logf("Update: %v", err)
		}
		select {
		case <-term.Context().Done():
			t.Fatalf("the term ended while a majority was up: %v", context.Cause(term.Context()))
		case <-time.After(testTimings.retryPeriod):
		}
	}
}
