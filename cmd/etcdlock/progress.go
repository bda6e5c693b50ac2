package main

import (
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Progress notes of run and elect that come from inside a session: the
// lock-delay being waited out and failing renewals.

// lockDelayMessage is how package lock logs that an acquisition waits out
// a lock-delay (at Info, with the fields name and lock-delay).
const lockDelayMessage = "the previous holder ended without releasing: waiting out the lock-delay"

// delayNotes is a zap core that turns lock's log line about a lock-delay
// into a note, at any --log-level.
type delayNotes struct{ p *printer }

func (c delayNotes) Enabled(l zapcore.Level) bool      { return l >= zapcore.InfoLevel }
func (c delayNotes) With([]zapcore.Field) zapcore.Core { return c }
func (c delayNotes) Sync() error                       { return nil }
func (c delayNotes) Write(_ zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	name, _ := enc.Fields["name"].(string)
	d, _ := enc.Fields["lock-delay"].(time.Duration)
	c.p.Note("lock %q: its previous holder ended without releasing; waiting out the lock-delay (%v) before running the command", name, d)
	return nil
}

func (c delayNotes) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if strings.HasPrefix(e.Message, lockDelayMessage) {
		return ce.AddCore(e, c)
	}
	return ce
}

// withDelayNotes is lg with the lock-delay notes.
func withDelayNotes(lg *zap.Logger, p *printer) *zap.Logger {
	return lg.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewTee(c, delayNotes{p})
	}))
}

// renewWarning says when renewals are failing, before the lock is lost,
// and when one succeeded again. A renewal that hangs (etcd cut off) reports
// nothing until the deadline, so it watches the lease's remaining time:
// renewed every third of the TTL, a lease has more than two fifths of it
// left unless renewals fail. Past the deadline it says nothing: the lock
// is lost, which run reports, and "lost at <a time gone by> unless one
// succeeds first" would be wrong (etcdlock stopped by Ctrl-Z past the
// deadline, then fg).
type renewWarning struct {
	failing bool
}

// lease is what renewWarning reads of a session (*lock.Session).
type lease interface {
	TTL() time.Duration
	Deadline() time.Time
	Err() error
}

// check notes a change, from supervise's tick.
func (r *renewWarning) check(p *printer, s lease) {
	if s.Err() != nil {
		return
	}
	left := time.Until(s.Deadline())
	if left <= 0 {
		return
	}
	failing := left < 2*s.TTL()/5
	switch {
	case failing && !r.failing:
		p.Note("renewals of the lease are failing: the lock is lost at %s unless one succeeds first", s.Deadline().Local().Format(time.RFC3339Nano))
	case !failing && r.failing:
		p.Note("the lease was renewed again")
	}
	r.failing = failing
}
