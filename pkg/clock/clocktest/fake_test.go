package clocktest_test

import (
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/etcdlock/etcdlock/pkg/clock"
	"github.com/etcdlock/etcdlock/pkg/clock/clocktest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var t0 = time.Unix(1_000_000, 0)

// received returns the value waiting on c, if any.
func received(c <-chan time.Time) (time.Time, bool) {
	select {
	case v := <-c:
		return v, true
	default:
		return time.Time{}, false
	}
}

// mustFire fails t unless tm's channel holds want.
func mustFire(t *testing.T, tm clock.Timer, want time.Time) {
	t.Helper()
	got, ok := received(tm.C())
	if !ok {
		t.Fatalf("timer did not fire, want %v", want)
	}
	if !got.Equal(want) {
		t.Errorf("timer sent %v, want %v", got, want)
	}
}

// mustNotFire fails t if tm's channel holds a value.
func mustNotFire(t *testing.T, tm clock.Timer) {
	t.Helper()
	if v, ok := received(tm.C()); ok {
		t.Fatalf("timer fired with %v", v)
	}
}

func TestNowAndSince(t *testing.T) {
	f := clocktest.NewFake(t0)
	if !f.Now().Equal(t0) {
		t.Errorf("Now() = %v, want %v", f.Now(), t0)
	}
	f.Step(3 * time.Second)
	if got := f.Since(t0); got != 3*time.Second {
		t.Errorf("Since(t0) after Step(3s) = %v", got)
	}
	f.SetTime(t0.Add(-time.Second))
	if got := f.Since(t0); got != -time.Second {
		t.Errorf("Since(t0) after SetTime back = %v", got)
	}
}

func TestTimerFiresExactlyWhenDue(t *testing.T) {
	for name, move := range map[string]func(f *clocktest.Fake, d time.Duration){
		"Step":    func(f *clocktest.Fake, d time.Duration) { f.Step(d) },
		"SetTime": func(f *clocktest.Fake, d time.Duration) { f.SetTime(f.Now().Add(d)) },
	} {
		t.Run(name, func(t *testing.T) {
			f := clocktest.NewFake(t0)
			tm := f.NewTimer(5 * time.Second)
			move(f, 5*time.Second-time.Nanosecond)
			mustNotFire(t, tm)
			if f.Waiters() != 1 || !f.HasWaiters() {
				t.Errorf("before due: Waiters() = %d, HasWaiters() = %v", f.Waiters(), f.HasWaiters())
			}
			move(f, time.Nanosecond)
			mustFire(t, tm, t0.Add(5*time.Second))
			if f.Waiters() != 0 || f.HasWaiters() {
				t.Errorf("after firing: Waiters() = %d, HasWaiters() = %v", f.Waiters(), f.HasWaiters())
			}
			move(f, time.Hour)
			mustNotFire(t, tm) // once only
		})
	}
}

// A timer overtaken by a large step is sent the time it was due.
func TestTimersSentTheirDueTime(t *testing.T) {
	f := clocktest.NewFake(t0)
	ds := []time.Duration{3 * time.Second, time.Second, 2 * time.Second, time.Second}
	var tms []clock.Timer
	for _, d := range ds {
		tms = append(tms, f.NewTimer(d))
	}
	late := f.NewTimer(11 * time.Second)
	f.Step(10 * time.Second)
	for i, tm := range tms {
		mustFire(t, tm, t0.Add(ds[i]))
	}
	mustNotFire(t, late)
	if f.Waiters() != 1 {
		t.Errorf("Waiters() = %d, want 1", f.Waiters())
	}
	late.Stop()
}

func TestNonPositiveDurationFiresAtOnce(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		f := clocktest.NewFake(t0)
		tm := f.NewTimer(d)
		mustFire(t, tm, t0)
		if f.HasWaiters() {
			t.Errorf("NewTimer(%v) left a waiter", d)
		}
		f.Step(time.Second)
		if tm.Reset(d) {
			t.Errorf("Reset(%v) of a received timer = true", d)
		}
		mustFire(t, tm, t0.Add(time.Second))
	}
}

// Moving the time back fires nothing; a timer stays due at its time.
func TestSetTimeBack(t *testing.T) {
	f := clocktest.NewFake(t0)
	tm := f.NewTimer(time.Second)
	f.SetTime(t0.Add(-time.Hour))
	mustNotFire(t, tm)
	f.SetTime(t0.Add(time.Second - time.Nanosecond))
	mustNotFire(t, tm)
	f.Step(time.Nanosecond)
	mustFire(t, tm, t0.Add(time.Second))
}

// timerStates puts a timer set for one second into each state that Stop
// and Reset tell apart, and says whether they report it active.
var timerStates = []struct {
	name   string
	setup  func(f *clocktest.Fake, tm clock.Timer)
	active bool
}{
	{"waiting", func(*clocktest.Fake, clock.Timer) {}, true},
	{"fired, not received", func(f *clocktest.Fake, _ clock.Timer) { f.Step(time.Second) }, true},
	{"fired and received", func(f *clocktest.Fake, tm clock.Timer) { f.Step(time.Second); <-tm.C() }, false},
	{"stopped", func(_ *clocktest.Fake, tm clock.Timer) { tm.Stop() }, false},
}

// Stop and Reset report whether the timer was active, and neither leaves
// a stale value to receive.
func TestStopAndReset(t *testing.T) {
	for _, tc := range timerStates {
		timer := func() (*clocktest.Fake, clock.Timer) {
			f := clocktest.NewFake(t0)
			tm := f.NewTimer(time.Second)
			tc.setup(f, tm)
			return f, tm
		}
		t.Run(tc.name+"/Stop", func(t *testing.T) {
			f, tm := timer()
			if got := tm.Stop(); got != tc.active {
				t.Errorf("Stop() = %v, want %v", got, tc.active)
			}
			mustNotFire(t, tm)
			f.Step(time.Hour)
			mustNotFire(t, tm)
			if f.HasWaiters() {
				t.Error("a stopped timer is a waiter")
			}
		})
		t.Run(tc.name+"/Reset", func(t *testing.T) {
			f, tm := timer()
			start := f.Now()
			if got := tm.Reset(2 * time.Second); got != tc.active {
				t.Errorf("Reset() = %v, want %v", got, tc.active)
			}
			mustNotFire(t, tm)
			if f.Waiters() != 1 {
				t.Errorf("Waiters() = %d after Reset, want 1", f.Waiters())
			}
			f.Step(2*time.Second - time.Nanosecond)
			mustNotFire(t, tm)
			f.Step(time.Nanosecond)
			mustFire(t, tm, start.Add(2*time.Second))
		})
	}
}

// Timers used from many goroutines while another moves the time: run with
// -race. Every timer fires, at or after its due time.
func TestTimersFireAtOrAfterDueUnderConcurrentUse(t *testing.T) {
	f := clocktest.NewFake(t0)
	const workers, rounds = 8, 50
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				d := time.Duration(1+(w+i)%7) * time.Millisecond
				tm := f.NewTimer(time.Hour)
				if i%3 == 0 {
					tm.Stop()
				}
				start := f.Now()
				tm.Reset(d)
				v := <-tm.C()
				if v.Before(start.Add(d)) {
					t.Errorf("timer of %v set at %v fired with %v", d, start, v)
				}
				if f.Since(v) < 0 {
					t.Errorf("fired with %v, after the Fake's time %v", v, f.Now())
				}
				tm.Stop()
			}
		})
	}
	done := make(chan struct{})
	var stepper sync.WaitGroup
	stepper.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			f.Step(time.Millisecond)
			_ = f.Waiters()
			time.Sleep(10 * time.Microsecond)
		}
	})
	wg.Wait()
	close(done)
	stepper.Wait()
}
