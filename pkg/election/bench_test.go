package election_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/pkg/election"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
)

// BenchmarkFailover measures how long an election has no running leader:
// from the leader's graceful Resign, or from its crash (its etcd client
// closed, no resign), to the next leader's OnStartedLeading. TTL 2 s; the
// crash figure is about one TTL, so with the default TTL of 10 s it is about
// 10 s. make bench prints client-go's documented defaults next to it.
func BenchmarkFailover(b *testing.B) {
	for _, kind := range []string{"graceful", "crash"} {
		b.Run("kind="+kind, func(b *testing.B) {
			var total time.Duration
			for i := range b.N {
				total += failover(b, fmt.Sprintf("%s%d/", prefix(b), i), kind == "crash")
			}
			b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/failover")
		})
	}
}

// failover runs a leader and a queued follower under pfx, ends the leader
// (crash or resign) and returns the time until the follower leads.
func failover(b *testing.B, pfx string, crash bool) time.Duration {
	ctx := context.Background()
	leading := make(chan time.Time, 2)
	cbs := election.Callbacks{OnStartedLeading: func(ctx context.Context, _ election.Term) {
		leading <- time.Now()
		<-ctx.Done()
	}}
	wait := func(who string) time.Time { return receive(b, leading, 30*time.Second, who+" leading") }
	aCli := etcdtest.Client(b, cluster.Endpoints()...)
	a := start(b, election.Config{Identity: "a", Client: aCli, Prefix: pfx, Callbacks: cbs, Logger: zap.NewNop()})
	defer a.stop()
	wait("a")
	f := start(b, election.Config{Identity: "b", Prefix: pfx, Callbacks: cbs, Logger: zap.NewNop()})
	defer f.stop()
	waitQueued(b, aCli, pfx, 1)
	ended := time.Now()
	if crash {
		aCli.Close()
	} else if err := a.e.Resign(ctx); err != nil {
		b.Fatal(err)
	}
	return wait("b").Sub(ended)
}
