package lock

import (
	"context"
	"fmt"
	"sync"

	"github.com/etcdlock/etcdlock/pkg/internal/keyspace"
)

// claimTable is a session's claims on names: a claim starts when an
// acquisition of a name starts (Session.claim) and ends when its Lock's
// clean-up is done (Session.unclaim), so that the session has one Lock
// per name at a time. Guarded by Session.mu, but for inflight.
type claimTable struct {
	byName map[string]*Lock
	// contended are semaphores' names whose last acquisition on this
	// session found keys under them (see slotHold.queue).
	contended map[string]struct{}
	seq       uint64 // acquisitions so far (Record.Seq)
	// inflight counts the acquisitions in progress (claim to return):
	// Close waits for them, so that none writes a marker after Close
	// deleted the markers.
	inflight sync.WaitGroup
}

// all lists the Locks with a claim, each once.
func (t *claimTable) all() []*Lock {
	ls := make([]*Lock, 0, len(t.byName))
	for name, l := range t.byName {
		if l.name == name { // an AcquireAll's claims its names, its first among them
			ls = append(ls, l)
		}
	}
	return ls
}

// claim registers a new claim on name, or explains why there can be none.
// A claim whose lock is already released or lost but whose clean-up (the
// key's deletion) is still in flight is waited for, so that the new claim
// usually finds the name clean; what a failed clean-up leaves behind is
// replaced, not adopted (see removeLeftover).
//
// An AcquireAll claims every name of its set at once, or none.
func (s *Session) claim(ctx context.Context, names []string, ac acquireConfig) (*Lock, error) {
	for _, name := range names {
		if err := ValidateName(name); err != nil {
			return nil, err
		}
	}
	for {
		s.mu.Lock()
		if s.err != nil {
			s.mu.Unlock()
			return nil, s.err
		}
		var old *Lock
		for _, name := range names {
			if o, ok := s.claims.byName[name]; ok {
				old = o
				break
			}
		}
		if old == nil {
			l := s.newLock(names, ac)
			for _, name := range names {
				s.claims.byName[name] = l
			}
			s.claims.inflight.Add(1) // done by bind's stop; under mu, before Close's end
			s.mu.Unlock()
			s.cfg.metrics.Waiting(1)
			return l, nil
		}
		// Made only when an acquisition waits on it: most locks never
		// have one.
		if old.claimDropped == nil {
			old.claimDropped = make(chan struct{})
		}
		claimDropped := old.claimDropped
		s.mu.Unlock()
		if st := old.currentState(); st != stateLost && st != stateReleased {
			return nil, fmt.Errorf("%w: %q", ErrAlreadyClaimed, old.name)
		}
		select {
		case <-claimDropped:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// newLock makes the Lock of a new claim on names, with options ac, and of
// the kind they choose (newKind). s.mu must be held: it numbers the
// acquisition (keyspace.Record.Seq).
func (s *Session) newLock(names []string, ac acquireConfig) *Lock {
	s.claims.seq++
	ac.names = names
	var keys []string // of the names after the first: an AcquireAll's
	for _, name := range names[1:] {
		keys = append(keys, keyspace.Of(s.cfg.prefix, name).Contender(int64(s.keeper.id)))
	}
	n := lockName{name: names[0], key: keyspace.Of(s.cfg.prefix, names[0]).Contender(int64(s.keeper.id))}
	l := &Lock{s: s, lockName: n, kind: newKind(ac, names[1:], keys),
		value: newRecord(s.cfg.owner, s.cfg.origin, s.cfg.clock.Now(), s.claims.seq, ac), waitHook: ac.waitHook}
	l.ctx, l.cancel = context.WithCancelCause(s.alive)
	l.since = s.cfg.clock.Now()
	return l
}

// unclaim drops l's claims on its names, where l still has them.
func (s *Session) unclaim(l *Lock) {
	s.mu.Lock()
	for _, name := range l.names() {
		if s.claims.byName[name] == l {
			delete(s.claims.byName, name)
		}
	}
	if l.claimDropped != nil {
		close(l.claimDropped)
		l.claimDropped = nil
	}
	s.mu.Unlock()
}
