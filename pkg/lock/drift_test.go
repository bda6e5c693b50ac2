package lock_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/pkg/clock"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// slowClock runs at rate times real time from base (rate < 1: a clock
// that runs slow, as a holder's whose oscillator drifts or whose VM is
// starved of timer ticks). Its timers fire after the real time their
// duration takes on it; the time they send is real.
type slowClock struct {
	base time.Time
	rate float64
}

var _ clock.Clock = slowClock{}

func (c slowClock) Now() time.Time {
	return c.base.Add(time.Duration(float64(time.Since(c.base)) * c.rate))
}
func (c slowClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c slowClock) NewTimer(d time.Duration) clock.Timer {
	return slowTimer{time.NewTimer(c.real(d)), c}
}
func (c slowClock) real(d time.Duration) time.Duration { return time.Duration(float64(d) / c.rate) }

type slowTimer struct {
	t *time.Timer
	c slowClock
}

func (s slowTimer) C() <-chan time.Time        { return s.t.C }
func (s slowTimer) Stop() bool                 { return s.t.Stop() }
func (s slowTimer) Reset(d time.Duration) bool { return s.t.Reset(s.c.real(d)) }

// driftTTL is the lease TTL of the drift trials: its default safety
// margin is max(TTL/10, 250 ms) = 250 ms.
const driftTTL = 2 * time.Second

// lossLead holds a lock on a session whose clock runs at rate, cuts the
// client off from etcd (a blackholed proxy) at a point of the renewal
// cycle set by phase, and returns when etcd deleted the key (seen by a
// watcher) minus when the lock declared itself lost: positive when the
// holder stopped first.
func lossLead(tb testing.TB, rate float64, phase int) time.Duration {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, url := etcdtest.Proxy(tb, cluster.Endpoints()[0])
	cli := etcdtest.Client(tb, url)
	watcher := etcdtest.Client(tb, cluster.Endpoints()...)
	s, err := lock.NewSession(ctx, cli, lock.WithTTL(driftTTL), lock.WithPrefix(fmt.Sprintf("/drift/%d/", time.Now().UnixNano())),
		lock.WithClock(slowClock{base: time.Now(), rate: rate}))
	if err != nil {
		tb.Fatal(err)
	}
	defer s.Abandon()
	l, err := s.Acquire(ctx, "x")
	if err != nil {
		tb.Fatal(err)
	}
	wch := watcher.Watch(ctx, l.Key(), clientv3.WithFilterPut())
	time.Sleep(time.Duration(phase%7) * 100 * time.Millisecond) // the fault: cut at varied points of the renewal cycle
	p.BlackholeTx()
	p.BlackholeRx()
	defer func() { p.UnblackholeTx(); p.UnblackholeRx() }()
	var lost, deleted time.Time
	lostCh := l.Context().Done()
	for lost.IsZero() || deleted.IsZero() {
		select {
		case <-lostCh:
			lost, lostCh = time.Now(), nil
		case wr, ok := <-wch:
			if !ok {
				tb.Fatalf("rate %.2f: the watch ended before the key was deleted: %v", rate, ctx.Err())
			}
			if len(wr.Events) > 0 {
				deleted, wch = time.Now(), nil
			}
		case <-ctx.Done():
			tb.Fatalf("rate %.2f: lost %v, deleted %v: %v", rate, !lost.IsZero(), !deleted.IsZero(), ctx.Err())
		}
	}
	return deleted.Sub(lost)
}

// TestSlowClockLossOrder: a holder whose clock keeps time declares loss
// before etcd deletes its key; one whose clock runs at half speed does so
// after (its deadline, 1.75 s on its clock, is 3.5 s of real time against
// the lease's 2 s): the drift the deadline cannot absorb, which
// BenchmarkClockDrift bounds.
func TestSlowClockLossOrder(t *testing.T) {
	for _, tt := range []struct {
		rate   float64
		before bool
	}{{1, true}, {0.5, false}} {
		t.Run(strconv.FormatFloat(tt.rate, 'f', 2, 64), func(t *testing.T) {
			lead := lossLead(t, tt.rate, 3)
			if (lead > 0) != tt.before {
				t.Errorf("rate %.2f: etcd deleted the key %v after the holder declared loss; want before=%v", tt.rate, lead, tt.before)
			}
		})
	}
}

// BenchmarkClockDrift measures, for holder clocks running slower than
// real time, the lead of lossLead (DRIFT_TRIALS trials per rate, default
// 5, TTL 2 s): the slowest rate whose every trial's lead is positive is
// the drift the deadline tolerated. Run with -benchtime 1x.
func BenchmarkClockDrift(b *testing.B) {
	trials, _ := strconv.Atoi(os.Getenv("DRIFT_TRIALS"))
	if trials <= 0 {
		trials = 5
	}
	for _, rate := range []float64{1, 0.95, 0.9, 0.875, 0.85, 0.8, 0.75, 0.7, 0.65, 0.6} {
		var leads []time.Duration
		for i := range trials {
			leads = append(leads, lossLead(b, rate, i))
		}
		slices.Sort(leads)
		late := 0
		for _, d := range leads {
			if d <= 0 {
				late++
			}
		}
		b.Logf("clock rate %.3f (%.1f %% slow): lead min %v, median %v, max %v; %d of %d after etcd's delete",
			rate, 100*(1-rate), leads[0].Round(time.Millisecond), leads[len(leads)/2].Round(time.Millisecond), leads[len(leads)-1].Round(time.Millisecond), late, trials)
		b.ReportMetric(float64(leads[0].Milliseconds()), fmt.Sprintf("rate-%.3f-min-lead-ms", rate))
	}
}
