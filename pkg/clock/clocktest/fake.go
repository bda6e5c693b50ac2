package clocktest

import (
	"slices"
	"sync"
	"time"

	"github.com/etcdlock/etcdlock/pkg/clock"
)

var (
	_ clock.Clock = (*Fake)(nil)
	_ clock.Timer = (*timer)(nil)
)

// Fake is a clock.Clock whose time moves only by Step and SetTime, which
// fire the timers that are then due. Its timers behave as time.Timer does
// in Go 1.23 and later: Stop and Reset discard a value not yet received,
// so none is stale. A Fake is safe for concurrent use; its zero value is
// not usable, use NewFake.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiting []*timer // armed and not yet fired, in the order they were armed
}

// NewFake returns a Fake whose time is t.
func NewFake(t time.Time) *Fake {
	return &Fake{now: t}
}

// Now returns the Fake's time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Since returns the Fake's time minus t.
func (f *Fake) Since(t time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now.Sub(t)
}

// NewTimer returns a timer due at the Fake's time now plus d. It fires
// when SetTime or Step reaches that time, sending it; if d <= 0, it fires
// at once, sending the Fake's time now.
func (f *Fake) NewTimer(d time.Duration) clock.Timer {
	t := &timer{f: f, c: make(chan time.Time, 1)}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.arm(t, d)
	return t
}

// Step moves the Fake's time on by d; see SetTime.
func (f *Fake) Step(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.set(f.now.Add(d))
}

// SetTime sets the Fake's time to t, which may be earlier than its time
// now, and fires every timer due at or before t: earliest due first, and
// timers due at the same time in the order they were set. Each timer is
// sent the time it was due, as a real timer is sent about the time it
// fires, not t. The sends do not block.
func (f *Fake) SetTime(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.set(t)
}

// Waiters returns the number of timers that are set and have not fired:
// a test can wait for the code under test to set its timers before it
// moves the time.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiting)
}

// HasWaiters reports whether Waiters is not zero.
func (f *Fake) HasWaiters() bool {
	return f.Waiters() > 0
}

// set moves the time to now and fires the timers due. f.mu is held.
func (f *Fake) set(now time.Time) {
	f.now = now
	var due []*timer
	f.waiting = slices.DeleteFunc(f.waiting, func(t *timer) bool {
		if t.due.After(now) {
			return false
		}
		due = append(due, t)
		return true
	})
	slices.SortStableFunc(due, func(a, b *timer) int { return a.due.Compare(b.due) })
	for _, t := range due {
		t.fire()
	}
}

// arm sets t to fire after d, at once if d <= 0. t is not waiting and its
// channel is empty. f.mu is held.
func (f *Fake) arm(t *timer, d time.Duration) {
	if d <= 0 {
		t.due = f.now
		t.fire()
		return
	}
	t.due = f.now.Add(d)
	f.waiting = append(f.waiting, t)
}

// disarm stops t and discards its value not yet received, and reports
// whether t was waiting or had such a value. f.mu is held.
func (f *Fake) disarm(t *timer) bool {
	n := len(f.waiting)
	f.waiting = slices.DeleteFunc(f.waiting, func(w *timer) bool { return w == t })
	active := len(f.waiting) < n
	select {
	case <-t.c:
		active = true
	default:
	}
	return active
}

// timer is a Fake's clock.Timer.
type timer struct {
	f   *Fake
	c   chan time.Time // capacity 1: at most the one value of the last firing
	due time.Time      // when it fires, or fired
}

// C returns the timer's channel.
func (t *timer) C() <-chan time.Time { return t.c }

// Stop stops t; see clock.Timer.
func (t *timer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	return t.f.disarm(t)
}

// Reset sets t to fire after d from the Fake's time now; see
// clock.Timer.
func (t *timer) Reset(d time.Duration) bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	active := t.f.disarm(t)
	t.f.arm(t, d)
	return active
}

// fire sends t's due time. The channel is empty, so the send does not
// block: a timer fires once per arming, and every arming but the first
// follows a disarm, which empties it. f.mu is held.
func (t *timer) fire() {
	t.c <- t.due
}
