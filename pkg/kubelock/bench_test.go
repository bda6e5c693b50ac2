package kubelock

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
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
