package lock_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// BenchmarkLossLeadTime cuts a holder off from etcd (a blackholed proxy)
// and measures, per trial, lead = when etcd deleted the holder's key (seen
// by a watcher) − when the client declared the lock lost: etcdlock's
// Lock.Context().Done() versus concurrency.Session.Done() of an equivalent session,
// cut off at the same instant. Positive lead means the client stopped first.
// Run with -benchtime 1x; LOSS_TRIALS trials (default 20), TTL 2s.
func BenchmarkLossLeadTime(b *testing.B) {
	const trials = 20
	ctx := context.Background()
	watcher := etcdtest.Client(b, cluster.Endpoints()...)
	var ours, theirs []time.Duration
	for trial := range trials {
		pA, urlA := etcdtest.Proxy(b, cluster.Endpoints()[0])
		pB, urlB := etcdtest.Proxy(b, cluster.Endpoints()[0])
		cliA, cliB := etcdtest.Client(b, urlA), etcdtest.Client(b, urlB)
		pfx := fmt.Sprintf("/bench/loss/%d/", trial)

		s, err := lock.NewSession(ctx, cliA, lock.WithTTL(2*time.Second), lock.WithPrefix(pfx))
		if err != nil {
			b.Fatal(err)
		}
		l, err := s.Acquire(ctx, "x")
		if err != nil {
			b.Fatal(err)
		}
		cs, err := concurrency.NewSession(cliB, concurrency.WithTTL(2))
		if err != nil {
			b.Fatal(err)
		}
		m := concurrency.NewMutex(cs, pfx+"mutex")
		if err := m.Lock(ctx); err != nil {
			b.Fatal(err)
		}
		deleted := func(key string) <-chan time.Time {
			ch := make(chan time.Time, 1)
			wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			wch := watcher.Watch(wctx, key, clientv3.WithFilterPut())
			go func() {
				defer cancel()
				for wr := range wch {
					if len(wr.Events) > 0 {
						ch <- time.Now()
						return
					}
				}
			}()
			return ch
		}
		delA, delB := deleted(l.Key()), deleted(m.Key())
		time.Sleep(time.Duration(trial%7) * 100 * time.Millisecond) // cut at varied points of the renewal cycle
		pA.BlackholeTx()
		pA.BlackholeRx()
		pB.BlackholeTx()
		pB.BlackholeRx()
		var lostA, lostB time.Time
		lostCh, doneCh := l.Context().Done(), cs.Done()
		for lostCh != nil || doneCh != nil {
			select {
			case <-lostCh:
				lostA, lostCh = time.Now(), nil
			case <-doneCh:
				lostB, doneCh = time.Now(), nil
			case <-time.After(20 * time.Second):
				b.Fatalf("trial %d: no loss reported", trial)
			}
		}
		ours = append(ours, (<-delA).Sub(lostA))
		theirs = append(theirs, (<-delB).Sub(lostB))
		pA.UnblackholeTx()
		pA.UnblackholeRx()
		s.Close(ctx)
	}
	sort.Slice(ours, func(i, j int) bool { return ours[i] < ours[j] })
	sort.Slice(theirs, func(i, j int) bool { return theirs[i] < theirs[j] })
	b.ReportMetric(float64(ours[0].Milliseconds()), "etcdlock-min-lead-ms")
	b.ReportMetric(float64(ours[len(ours)/2].Milliseconds()), "etcdlock-median-lead-ms")
	b.ReportMetric(float64(theirs[0].Milliseconds()), "session-min-lead-ms")
	b.ReportMetric(float64(theirs[len(theirs)/2].Milliseconds()), "session-median-lead-ms")
	neg := 0
	for _, d := range theirs {
		if d < 0 {
			neg++
		}
	}
	b.ReportMetric(float64(neg), "session-late-trials")
	b.Logf("etcdlock lead times: %v", ours)
	b.Logf("concurrency.Session lead times: %v", theirs)
}
