package lock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Confirm asks etcd, in one linearizable read, whether the lock is still
// held: nil if its keys still exist with their create revisions. A key
// found gone loses the lock, and Confirm returns the lock's error.
func (l *Lock) Confirm(ctx context.Context) error {
	l.mu.Lock()
	state, lerr := l.state, l.err
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(l.key), "=", l.rev)}
	if key, tok := l.kind.holder(l); key != l.key { // a semaphore's slot key
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(key), "=", int64(tok)))
	}
	_, keys := l.kind.others()
	for _, k := range keys {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(k), "=", l.rev))
	}
	l.mu.Unlock()
	if state != stateActive {
		return lerr
	}
	// etcd serves a transaction of comparisons only from the member's
	// own state (serializably); a Get in it makes the read linearizable.
	resp, err := l.s.client.Txn(ctx).If(cmps...).Then(clientv3.OpGet(l.key, clientv3.WithCountOnly())).Commit()
	if err != nil {
		return fmt.Errorf("lock: confirm %q: %w", l.name, asCtxErr(ctx, err))
	}
	if !resp.Succeeded {
		l.keyDeleted()
	}
	return l.Err()
}

// goneLookupTimeout bounds the question a deleted key raises: whether the
// session's lease still lives.
const goneLookupTimeout = 500 * time.Millisecond

// keyDeleted ends l, one of whose keys etcd reported deleted. It asks etcd
// whether the session's lease lives: if it is gone, the session ends (see
// leaseGone) and l with it; otherwise, or without an answer within
// goneLookupTimeout, l is lost with ErrKeyDeleted.
func (l *Lock) keyDeleted() {
	s := l.s
	if st := l.currentState(); st == stateLost || st == stateReleased {
		return // a revoke deletes every key of the session: one question is enough
	}
	ctx, cancel := context.WithTimeout(s.alive, goneLookupTimeout)
	resp, err := s.client.TimeToLive(ctx, s.keeper.id)
	cancel()
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		s.leaseGone(err)
	case err == nil && resp.TTL < 0: // etcd's answer for a lease it does not have
		s.leaseGone(nil)
	}
	l.lose(ErrKeyDeleted, err) // nothing left to do if the session's end lost it
}

// leaseGone ends the session after etcd answered that its lease is gone,
// with detail, the answer if it came as an error (see goneCause).
func (s *Session) leaseGone(detail error) {
	now := s.cfg.clock.Now()
	deadline, _ := s.keeper.lastDeadline()
	earliest := deadline.Add(s.keeper.margin) // the last successful renewal's send time + TTL
	s.lose(goneCause(now, earliest), detail)
}

// goneCause is why a lease is gone that etcd reported gone in an answer
// received at answered, when etcd could not have expired it before
// earliest: ErrLeaseRevoked if answered is before earliest, else
// ErrLeaseExpired.
func goneCause(answered, earliest time.Time) error {
	if answered.Before(earliest) {
		return ErrLeaseRevoked
	}
	return ErrLeaseExpired
}
