package lock

import (
	"slices"
	"sync/atomic"
)

// ledger is what a session must still clean up, beyond what its Locks
// hold: the leftover keys its failed or lost acquisitions may have left
// (swept by the renewal loop) and the locks whose lock-delay marker is a
// leftover that Close must delete. Guarded by Session.mu, but for
// sweepNow and the flags.
type ledger struct {
	leftovers []leftover
	sweepNow  chan struct{} // wakes the renewal loop to sweep leftovers at once
	// markers are the locks of clean ends whose Release, or failed
	// acquisition's clean-up, could not delete their lock-delay marker
	// (keepForClose): Close deletes those markers.
	markers []*Lock
	// abandoned is set by Abandon: its locks' keys must stay until the
	// lease expires, and no later Release deletes them.
	abandoned atomic.Bool
	// revoked is set by the Close whose revoke succeeded (or found the
	// lease gone): a later Close has nothing left to do.
	revoked atomic.Bool
}

// addLeftovers queues keys that l may have written for the renewal loop to
// delete (see sweepLeftovers).
func (s *Session) addLeftovers(l *Lock, keys ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.clock.Now()
	for _, key := range keys {
		s.ledger.leftovers = append(s.ledger.leftovers, leftover{key: key, value: l.value, added: now})
	}
}

// sweepSoon asks the renewal loop to sweep the leftovers now rather than
// after its next renewal.
func (s *Session) sweepSoon() {
	select {
	case s.ledger.sweepNow <- struct{}{}:
	default:
	}
}

// keepForClose remembers l, whose Release or failed acquisition's
// clean-up could not delete its keys, for Close, if Close has anything to
// delete for it (kind.closeOps): a lock-delay marker of a clean end must
// not outlive the session.
func (s *Session) keepForClose(l *Lock) {
	l.mu.Lock()
	keep := len(l.kind.closeOps(l)) > 0
	l.mu.Unlock()
	if !keep {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.ledger.markers, l) {
		s.ledger.markers = append(s.ledger.markers, l)
	}
}

// released forgets l, whose Release succeeded, if it was kept for Close.
func (s *Session) released(l *Lock) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ledger.markers = slices.DeleteFunc(s.ledger.markers, func(k *Lock) bool { return k == l })
}

// rewrote forgets the locks kept for Close under names, of which the
// session has just written new keys (s.mu held): a session has one key per
// name, so their keys are gone — deleted with their markers, or by
// someone else, which leaves the markers of those unclean ends to the
// next holder — and Close would have nothing of theirs to delete. A
// session reused for hours keeps at most one per name.
func (s *Session) rewrote(names []string) {
	s.ledger.markers = slices.DeleteFunc(s.ledger.markers, func(k *Lock) bool { return slices.Contains(names, k.name) })
}
