package lock

import (
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/pkg/clock/clocktest"
)

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
