package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

type fakeLease struct{ left, ttl time.Duration }

func (f fakeLease) TTL() time.Duration  { return f.ttl }
func (f fakeLease) Deadline() time.Time { return time.Now().Add(f.left) }
func (f fakeLease) Err() error          { return nil }

// TestRenewWarning walks a lease through healthy, failing, renewed again,
// failing, and past its deadline: one note per change, and none once the
// deadline has passed (the loss is reported instead).
func TestRenewWarning(t *testing.T) {
	var buf bytes.Buffer
	p := &printer{errOut: &buf}
	var r renewWarning
	const ttl = 10 * time.Second
	steps := []struct {
		left time.Duration
		note string
	}{
		{9 * time.Second, ""},
		{3 * time.Second, "renewals of the lease are failing"},
		{2 * time.Second, ""},
		{8 * time.Second, "the lease was renewed again"},
		{3 * time.Second, "renewals of the lease are failing"},
		{0, ""},
		{0, ""},
	}
	for i, st := range steps {
		buf.Reset()
		r.check(p, fakeLease{st.left, ttl})
		got := buf.String()
		if (st.note == "") != (got == "") || !strings.Contains(got, st.note) {
			t.Errorf("step %d, %v left: noted %q, want %q", i, st.left, got, st.note)
		}
	}
	// Stopped past the deadline while renewals were fine: still nothing.
	var fresh renewWarning
	buf.Reset()
	fresh.check(p, fakeLease{0, ttl})
	if buf.Len() != 0 {
		t.Errorf("past the deadline: noted %q, want nothing", buf.String())
	}
}
