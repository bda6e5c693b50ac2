package election_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/pkg/election"
	"github.com/etcdlock/etcdlock/pkg/embedded"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/holders"
)

// failoverKinds are the ends of a term BenchmarkFailover measures, each
// with a row in the README's failover table.
var failoverKinds = []string{"graceful", "crash", "delete", "revoke", "delete-later", "revoke-later", "restart"}

// BenchmarkFailover measures how long an election has no running leader,
// TTL 2 s, from the end of the leader's term to the next leader's
// OnStartedLeading:
//
//   - graceful: from the leader's Resign;
//   - crash: from the leader's crash (its etcd client closed, no resign);
//   - delete: from an operator's delete of the leader key, as soon as the
//     follower queued, tens of milliseconds into the term;
//   - revoke: from an operator's revoke of the leader's lease, alike;
//   - delete-later, revoke-later: the same, 300 ms into the term, once
//     the leader watches its key (from 100 ms after its acquisition);
//   - restart: on an etcd of one member of its own (etcd's default raft
//     timing), from the member's restart after it was stopped until the
//     leader's context had ended and the clean-up timeout of the old
//     sessions' revoke had passed.
//
// The first four run on the tests' 3-member etcd. It reports the mean and
// the median, which a busy machine's outliers move less. make bench
// prints client-go's documented defaults next to them.
func BenchmarkFailover(b *testing.B) {
	for _, kind := range failoverKinds {
		b.Run("kind="+kind, func(b *testing.B) {
			var total time.Duration
			took := make([]time.Duration, 0, b.N)
			for i := range b.N {
				d := failover(b, fmt.Sprintf("%s%d/", prefix(b), i), kind)
				total += d
				took = append(took, d)
			}
			slices.Sort(took)
			b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/failover")
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "ms/failover-median")
		})
	}
}

// failover runs a leader and a queued follower under pfx, ends the
// leader's term as kind says and returns the time until the follower
// leads.
func failover(b *testing.B, pfx, kind string) time.Duration {
	ctx := context.Background()
	eps := cluster.Endpoints()
	var member *embedded.Member
	if kind == "restart" {
		c := etcdtest.Cluster(b)
		member, eps = c.Member(0), c.Endpoints()
	}
	leading := make(chan string, 4)
	ended := make(chan struct{}, 4)
	cbs := func(id string) election.Callbacks {
		return election.Callbacks{OnStartedLeading: func(ctx context.Context, _ election.Term) {
			leading <- id
			<-ctx.Done()
			ended <- struct{}{}
		}}
	}
	wait := func(who string) time.Time {
		if got := receive(b, leading, 60*time.Second, who+" leading"); got != who {
			b.Fatalf("%s leads, want %s", got, who)
		}
		return time.Now()
	}
	aCli := etcdtest.Client(b, eps...)
	a := start(b, cand{Identity: "a", Prefix: pfx, Logger: zap.NewNop(), Config: election.Config{Client: aCli, Callbacks: cbs("a")}})
	defer a.stop()
	wait("a")
	f := start(b, cand{Identity: "b", Prefix: pfx, Logger: zap.NewNop(), Config: election.Config{Client: etcdtest.Client(b, eps...), Callbacks: cbs("b")}})
	defer f.stop()
	waitQueued(b, aCli, pfx, 1)
	t := a.e.Term()
	if t == nil {
		b.Fatal("a does not lead")
	}
	if later, ok := strings.CutSuffix(kind, "-later"); ok {
		time.Sleep(time.Until(t.Started.Add(300 * time.Millisecond))) // how long the term ran is the fault
		kind = later
	}
	var end time.Time
	switch kind {
	case "graceful":
		end = time.Now()
		if err := a.e.Resign(ctx); err != nil {
			b.Fatal(err)
		}
	case "crash":
		end = time.Now()
		aCli.Close()
	case "delete":
		end = time.Now()
		if _, err := aCli.Delete(ctx, t.Key); err != nil {
			b.Fatal(err)
		}
	case "revoke":
		st, err := holders.Inspect(ctx, aCli, pfx, "ctl")
		if err != nil || st.Holder == nil || st.Holder.Token != t.Token {
			b.Fatalf("holder %+v (%v), want a's term %v", st.Holder, err, t.Token)
		}
		end = time.Now()
		if _, err := aCli.Revoke(ctx, st.Holder.LeaseID); err != nil {
			b.Fatal(err)
		}
	case "restart":
		member.Stop()
		receive(b, ended, 60*time.Second, "end of a's term")
		// The sessions' Close revokes their leases on a context of the
		// clean-up timeout: past it, the old leases outlive the outage.
		time.Sleep(election.CleanupTimeout + time.Second) // the outage is the fault
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := member.Restart(rctx); err != nil {
			b.Fatal(err)
		}
		end = time.Now()
		// Either candidate may win the next term.
		receive(b, leading, 60*time.Second, "the next term")
		return time.Since(end)
	}
	return wait("b").Sub(end)
}
