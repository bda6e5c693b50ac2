package clock

import "time"

// Clock reads the time and starts timers. Implementations are safe for
// concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Since returns the time elapsed since t: Now().Sub(t).
	Since(t time.Time) time.Duration
	// NewTimer returns a Timer that sends the current time on its
	// channel once d has passed; at once if d <= 0.
	NewTimer(d time.Duration) Timer
}

// Timer is a single event, as time.Timer in Go 1.23 and later: no value
// that was due before a call to Stop or Reset is received after it.
type Timer interface {
	// C returns the channel on which the timer sends the time when it
	// fires. It is the same channel for the life of the timer.
	C() <-chan time.Time
	// Stop prevents the timer from firing. It reports whether it did:
	// false if the timer had already fired and its value was received,
	// or had been stopped.
	Stop() bool
	// Reset makes the timer fire once d has passed from now, discarding
	// any value not yet received. It reports whether the timer was
	// active, as Stop does.
	Reset(d time.Duration) bool
}

// Real returns the clock of package time.
func Real() Clock { return realClock{} }

// realClock is Clock on package time.
type realClock struct{}

func (realClock) Now() time.Time                  { return time.Now() }
func (realClock) Since(t time.Time) time.Duration { return time.Since(t) }
func (realClock) NewTimer(d time.Duration) Timer  { return realTimer{time.NewTimer(d)} }

// realTimer is Timer on a time.Timer.
type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }
