package kubelock

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"k8s.io/client-go/tools/leaderelection"

	"github.com/etcdlock/etcdlock/pkg/embedded"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// BenchmarkFailover measures, with client-go's LeaderElector
// (ReleaseOnCancel) on this lock, without controller-runtime, how long
// after a fault the next leader's term starts: after a release, after a
// crash (the leader stops renewing and cannot reach etcd), and after a
// partition that lasts until client-go's own OnStartedLeading context has
// ended; for the partition it also reports by how much client-go's own
// context outlived the start of the next term (clientgo-overlap; the
// context Lead passes never does). Three candidates on the 3-member
// cluster, client-go's default durations (LeaseDuration 15 s,
// RenewDeadline 10 s, RetryPeriod 2 s) with the DefaultTTL, and a 2 s TTL
// with a 500 ms RetryPeriod. client-go's Lease lock is measured beside
// this one with controller-runtime managers in package ctrlmanager
// (BenchmarkFailover there).
//
//	go test -run '^$' -bench 'Failover/partition' -benchtime 5x .
func BenchmarkFailover(b *testing.B) {
	defaults := timings{ttl: DefaultTTL, leaseDuration: 15 * time.Second, renewDeadline: 10 * time.Second, retryPeriod: 2 * time.Second}
	// The same with a 2 s TTL and a 500 ms RetryPeriod: the failover
	// follows the TTL and the retry, not LeaseDuration.
	short := defaults
	short.ttl, short.retryPeriod = 2*time.Second, 500*time.Millisecond
	for _, tc := range []struct {
		name string
		tm   timings
	}{{"defaults", defaults}, {"ttl=2s,retry=500ms", short}} {
		for _, fault := range []string{"release", "crash", "sustained-partition"} {
			b.Run(fmt.Sprintf("%s/%s", fault, tc.name), func(b *testing.B) {
				lg := newLedger()
				cands := map[string]*contender{}
				for i, who := range []string{"c0", "c1", "c2"} {
					cands[who] = startContender(b, lg, who, i, tc.tm)
				}
				var total, worst, overlap, worstOverlap time.Duration
				b.ResetTimer()
				for range b.N {
					took, from, to := failover(b, lg, cands, fault)
					total += took
					worst = max(worst, took)
					if fault == "sustained-partition" {
						lg.mu.Lock()
						o := from.clientGoEnd.Sub(to.term.Started())
						lg.mu.Unlock()
						overlap += o
						worstOverlap = max(worstOverlap, o)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/failover")
				b.ReportMetric(float64(worst.Milliseconds()), "ms-worst")
				if fault == "sustained-partition" {
					b.ReportMetric(float64(overlap.Milliseconds())/float64(b.N), "ms-clientgo-overlap")
					b.ReportMetric(float64(worstOverlap.Milliseconds()), "ms-clientgo-overlap-worst")
				}
				for _, c := range cands {
					c.stop()
				}
				lg.wg.Wait()
			})
		}
	}
}

// BenchmarkDialDuringPartition measures how long after a partition heals
// an etcd client made during it gets its first answer, through the test
// proxy (etcdtest.Proxy) the failover measurements partition with: the
// proxy's blackhole discards what it reads, so the HTTP/2 handshake of a
// connection opened during the partition never completes, and gRPC
// dials again only after its connect timeout (20 s). This is what makes
// the worst failovers of the measurements, when both followers were made
// during partitions of their own.
//
//	go test -run '^$' -bench 'DialDuringPartition' -benchtime 3x .
func BenchmarkDialDuringPartition(b *testing.B) {
	var total, worst time.Duration
	for range b.N {
		p, url := etcdtest.Proxy(b, cluster.Endpoints()[0])
		p.BlackholeTx()
		p.BlackholeRx()
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 5 * time.Second,
			DialKeepAliveTime: time.Second, DialKeepAliveTimeout: time.Second, Logger: zap.NewNop()})
		if err != nil {
			b.Fatal(err)
		}
		get := func() error {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, err := cli.Get(ctx, "x")
			return err
		}
		for range 3 { // partitioned: each call times out
			if err := get(); err == nil {
				b.Fatal("a Get answered through the blackhole")
			}
		}
		p.UnblackholeTx()
		p.UnblackholeRx()
		healed := time.Now()
		err = get()
		for err != nil {
			err = get()
		}
		took := time.Since(healed)
		total += took
		worst = max(worst, took)
		cli.Close()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms-to-first-answer")
	b.ReportMetric(float64(worst.Milliseconds()), "ms-worst")
}

// BenchmarkEtcdLeaderElection measures whether a term survives an election
// of etcd's own raft leader. A cluster of its own, 3 members at etcd's
// default raft timing (heartbeat 100 ms, election timeout 1 s); one
// elector configured by ElectionConfig leads. Each iteration kills etcd's
// raft leader (HardStop, no leadership transfer), waits for the next one,
// then watches the term for TTL + RenewDeadline more, and restarts the
// member. kept/kill is the share of kills the term survived; k is
// min(RenewDeadline, TTL − margin) over the election timeout. A killed
// member's peer handler can stay blocked in etcd's backend after HardStop,
// which the binary's leak check then reports after the results.
//
//	go test -run '^$' -bench EtcdLeaderElection -benchtime 8x .
func BenchmarkEtcdLeaderElection(b *testing.B) {
	const election = time.Second
	for _, tc := range []struct{ ttl, renew, retry time.Duration }{
		{2 * time.Second, time.Second, 300 * time.Millisecond},
		{3 * time.Second, 1500 * time.Millisecond, 500 * time.Millisecond},
		{4 * time.Second, 2 * time.Second, 500 * time.Millisecond},
		{4 * time.Second, 3 * time.Second, 500 * time.Millisecond},
		{DefaultTTL, DefaultTimings.RenewDeadline, DefaultTimings.RetryPeriod},
	} {
		b.Run(fmt.Sprintf("ttl=%v,renew=%v", tc.ttl, tc.renew), func(b *testing.B) {
			c := etcdtest.Cluster(b, embedded.WithMembers(3), embedded.WithRaftTiming(100*time.Millisecond, election))
			cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second,
				DialKeepAliveTime: time.Second, DialKeepAliveTimeout: time.Second, Logger: zap.NewNop()})
			if err != nil {
				b.Fatal(err)
			}
			defer cli.Close()
			tm := Timings{LeaseDuration: tc.renew * 3 / 2, RenewDeadline: tc.renew, RetryPeriod: tc.retry}
			lk, err := New(cli, "ctl", "a", tm, lock.WithPrefix(prefix(b)), lock.WithTTL(tc.ttl))
			if err != nil {
				b.Fatal(err)
			}
			defer lk.Close(context.Background())
			terms := make(chan Term, 100)
			cfg, err := ElectionConfig(lk, leaderelection.LeaderElectionConfig{Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					t, _ := TermFrom(ctx)
					terms <- t
					<-ctx.Done()
				},
				OnStoppedLeading: func() {},
			}})
			if err != nil {
				b.Fatal(err)
			}
			stop := runElector(b, cfg)
			defer stop()
			var term Term
			kept := 0
			b.ResetTimer()
			for range b.N {
				for term.t == nil || term.Context().Err() != nil {
					select {
					case term = <-terms:
					case <-time.After(time.Minute):
						b.Fatal("no term within a minute")
					}
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				old, err := c.Leader(ctx)
				if err != nil {
					b.Fatal(err)
				}
				old.HardStop()
				if _, err := c.Leader(ctx); err != nil {
					b.Fatal(err)
				}
				time.Sleep(tc.ttl + tc.renew) // the window in which a lost term would end
				if term.Context().Err() == nil {
					kept++
				} else {
					b.Logf("term %v ended: %v", term.Token(), context.Cause(term.Context()))
				}
				if err := old.Restart(ctx); err != nil {
					b.Fatal(err)
				}
				cancel()
			}
			b.ReportMetric(float64(kept)/float64(b.N), "kept/kill")
			live := tc.ttl - lk.cfg.marginFor(tc.ttl) // a term's life without a renewal
			b.ReportMetric(float64(min(tc.renew, live))/float64(election), "k")
		})
	}
}
