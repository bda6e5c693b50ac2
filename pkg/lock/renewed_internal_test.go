package lock

import (
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/pkg/clock/clocktest"
)

// A renewal's reply that comes once the deadline has passed, before the
// watchdog acted on it, does not move the deadline: whoever read it may
// have stopped already (etcdlock run's guardian did, and its command then
// exited as stopped by a signal where a loss was due). Before the
// deadline, a reply moves it.
func TestRenewedAfterTheDeadline(t *testing.T) {
	start := time.Unix(1_000, 0)
	for _, tt := range []struct {
		name    string
		arrives time.Duration // after start; the deadline is at start+2s
		want    bool
	}{
		{"before the deadline", 2*time.Second - time.Nanosecond, true},
		{"at the deadline", 2 * time.Second, false},
		{"after the deadline", 3 * time.Second, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktest.NewFake(start)
			s := &Session{cfg: config{clock: clk}, margin: time.Second, deadline: start.Add(2 * time.Second)}
			clk.Step(tt.arrives)
			send := start.Add(time.Second) // sent in time: only the reply is late
			if got := s.renewed(send, 3*time.Second); got != tt.want {
				t.Fatalf("renewed = %v, want %v", got, tt.want)
			}
			want := start.Add(2 * time.Second)
			if tt.want {
				want = send.Add(3*time.Second - time.Second)
			}
			if !s.deadline.Equal(want) {
				t.Errorf("deadline moved to start%+v, want start%+v", s.deadline.Sub(start), want.Sub(start))
			}
		})
	}
}

// A stray of an acquisition whose write a member held unanswered is
// looked for as long as the session lives: the member may thaw at any
// time. Others are forgotten after straySweeps sweeps and a TTL.
func TestLookAgainKeepsHeldStrays(t *testing.T) {
	start := time.Unix(1_000, 0)
	clk := clocktest.NewFake(start)
	s := &Session{cfg: config{clock: clk}, ttl: time.Second}
	plain, held := stray{added: start}, stray{added: start, held: true}
	clk.Step(time.Hour)
	for range straySweeps - 1 {
		s.lookAgain(&plain)
		s.lookAgain(&held)
	}
	if s.lookAgain(&plain) {
		t.Errorf("a stray is looked for again after %d sweeps and an hour", straySweeps)
	}
	if !s.lookAgain(&held) {
		t.Errorf("a held stray is forgotten after %d sweeps", straySweeps)
	}
}
