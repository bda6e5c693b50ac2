package clock_test

import (
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/etcdlock/etcdlock/pkg/clock"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestRealNowAndSince(t *testing.T) {
	c := clock.Real()
	before := time.Now()
	now := c.Now()
	if now.Before(before) || now.After(time.Now()) {
		t.Errorf("Now() = %v, not between the readings of package time", now)
	}
	if got := c.Since(before.Add(-time.Hour)); got < time.Hour {
		t.Errorf("Since(an hour ago) = %v", got)
	}
}

// The real clock's timer keeps package time's contract; in a bubble
// (testing/synctest) its time is the bubble's, which moves at once when
// every goroutine waits, so the test waits on no wall time.
func TestRealTimerStopsResetsAndDiscardsAStaleValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := clock.Real()
		tm := c.NewTimer(time.Millisecond)
		select {
		case <-tm.C():
		case <-time.After(10 * time.Second):
			t.Fatal("a 1ms timer did not fire")
		}
		if tm.Stop() {
			t.Error("Stop() of a fired and received timer = true")
		}
		if tm.Reset(time.Hour) {
			t.Error("Reset() of a stopped timer = true")
		}
		if !tm.Stop() {
			t.Error("Stop() of a waiting timer = false")
		}
		tm.Reset(time.Millisecond)
		time.Sleep(20 * time.Millisecond) // the bubble's time: the timer fires
		// Fired and not received: Reset discards the value.
		if !tm.Reset(time.Hour) {
			t.Error("Reset() of a fired, unreceived timer = false")
		}
		select {
		case v := <-tm.C():
			t.Errorf("stale value %v after Reset", v)
		default:
		}
		tm.Stop()
	})
}
