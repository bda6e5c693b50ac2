package lock

import (
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/pkg/clock/clocktest"
)

// A leftover of an acquisition whose write a member held unanswered is
// looked for as long as the session lives: the member may thaw at any
// time. Others are forgotten after leftoverSweeps sweeps and a TTL.
func TestLookAgainKeepsHeldLeftovers(t *testing.T) {
	start := time.Unix(1_000, 0)
	clk := clocktest.NewFake(start)
	s := &Session{cfg: config{clock: clk}, keeper: &keeper{ttl: time.Second}}
	plain, held := leftover{added: start}, leftover{added: start, held: true}
	clk.Step(time.Hour)
	for range leftoverSweeps - 1 {
		s.lookAgain(&plain)
		s.lookAgain(&held)
	}
	if s.lookAgain(&plain) {
		t.Errorf("a leftover is looked for again after %d sweeps and an hour", leftoverSweeps)
	}
	if !s.lookAgain(&held) {
		t.Errorf("a held leftover is forgotten after %d sweeps", leftoverSweeps)
	}
}
