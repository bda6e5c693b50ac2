package kubelock

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkFailover measures, with client-go's LeaderElector and its
// default durations (LeaseDuration 15 s, RenewDeadline 10 s, RetryPeriod
// 2 s) on this lock with its DefaultTTL, how long after a fault the next
// leader's term starts: after a release (ReleaseOnCancel) and after a crash
// (the leader stops renewing and cannot reach etcd). Three candidates on
// the 3-member cluster. client-go's own Lease lock needs a Kubernetes API
// server and is not run here: its bounds are printed beside.
func BenchmarkFailover(b *testing.B) {
	defaults := timings{ttl: DefaultTTL, leaseDuration: 15 * time.Second, renewDeadline: 10 * time.Second, retryPeriod: 2 * time.Second}
	// The same with a 2 s TTL and a 500 ms RetryPeriod: the failover
	// follows the TTL and the retry, not LeaseDuration.
	short := defaults
	short.ttl, short.retryPeriod = 2*time.Second, 500*time.Millisecond
	for _, bc := range []struct {
		name  string
		fault string
		tm    timings
	}{
		{"release/defaults", "release", defaults},
		{"crash/defaults", "crash", defaults},
		{"release/ttl=2s,retry=500ms", "release", short},
		{"crash/ttl=2s,retry=500ms", "crash", short},
	} {
		fault := bc.fault
		b.Run(bc.name, func(b *testing.B) {
			lg := newLedger()
			cands := map[string]*contender{}
			for i, who := range []string{"c0", "c1", "c2"} {
				cands[who] = startContender(b, lg, who, i, bc.tm)
			}
			var total, worst time.Duration
			b.ResetTimer()
			for range b.N {
				took, _, _ := failover(b, lg, cands, fault)
				total += took
				worst = max(worst, took)
			}
			b.StopTimer()
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/failover")
			b.ReportMetric(float64(worst.Milliseconds()), "ms-worst")
			for _, c := range cands {
				c.stop()
			}
			lg.wg.Wait()
		})
	}
	// Followers retry every RetryPeriod·(1 + rand·1.2) (wait.JitterUntil
	// with leaderelection.JitterFactor).
	poll := time.Duration(2.2 * float64(defaults.retryPeriod))
	fmt.Printf("reference: client-go's Lease lock with its defaults: release -> next leader up to %v; crash -> up to %v (LeaseDuration + the longest retry)\n",
		poll, defaults.leaseDuration+poll)
}
