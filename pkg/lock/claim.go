package lock

import (
	"context"
	"fmt"

	"github.com/etcdlock/etcdlock/pkg/internal/keyspace"
)

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
			if o, ok := s.claims[name]; ok {
				old = o
				break
			}
		}
		if old == nil {
			l := s.newLock(names, ac)
			for _, name := range names {
				s.claims[name] = l
			}
			s.inflight.Add(1) // done by bind's stop; under mu, before Close's end
			s.mu.Unlock()
			s.cfg.metrics.Waiting(1)
			return l, nil
		}
		// Made only when an acquisition waits on it: most locks never
		// have one.
		if old.unclaimed == nil {
			old.unclaimed = make(chan struct{})
		}
		unclaimed := old.unclaimed
		s.mu.Unlock()
		if st := old.State(); st != StateLost && st != StateReleased {
			return nil, fmt.Errorf("%w: %q", ErrAlreadyClaimed, old.name)
		}
		select {
		case <-unclaimed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// newLock makes the Lock of a new claim on names, with options ac, and of
// the kind they choose (newKind). s.mu must be held: it numbers the
// acquisition (keyspace.Record.Seq).
func (s *Session) newLock(names []string, ac acquireConfig) *Lock {
	s.seq++
	ac.names = names
	var keys []string // of the names after the first: an AcquireAll's
	for _, name := range names[1:] {
		keys = append(keys, keyspace.Of(s.cfg.prefix, name).Contender(int64(s.lease)))
	}
	l := &Lock{s: s, name: names[0], key: keyspace.Of(s.cfg.prefix, names[0]).Contender(int64(s.lease)), kind: newKind(ac, names[1:], keys),
		value: newRecord(s.cfg.owner, s.cfg.origin, s.cfg.clock.Now(), s.seq, ac), waitHook: ac.waitHook}
	l.ctx, l.cancel = context.WithCancelCause(s.alive)
	l.since = s.cfg.clock.Now()
	return l
}

// unclaim drops l's claims on its names, where l still has them.
func (s *Session) unclaim(l *Lock) {
	s.mu.Lock()
	for _, name := range l.Names() {
		if s.claims[name] == l {
			delete(s.claims, name)
		}
	}
	if l.unclaimed != nil {
		close(l.unclaimed)
		l.unclaimed = nil
	}
	s.mu.Unlock()
}
