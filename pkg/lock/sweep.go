package lock

import (
	"context"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// leftover is a leftover key (see "Words" in DESIGN.md) that the session
// knows of and sweeps: the key of a failed acquisition whose put may still
// land after its clean-up ran (see Lock.failAcquire), or a key that a
// lock of several keys still has after it was lost (see Lock.lose), or a
// key of an acquisition one of whose writes a member held unanswered,
// which may land after the keys were deleted (held, see Lock.landLate). The
// renewal loop deletes it, by its exact value, after the next few
// renewals.
type leftover struct {
	key, value string
	added      time.Time // on the session's clock
	sweeps     int       // sweeps that looked for it and did not find it
	// held is set for a key of an acquisition one of whose writes a
	// member held unanswered (Lock.mayLand): a member that thaws after
	// any wait delivers it, so it is looked for as long as the session
	// lives (up to maxHeldLeftovers of them).
	held bool
}

// sameWrite compares key with what one acquisition of this session wrote
// into it: its value (unique within the lease, see keyspace.Record.Seq) under this
// session's lease.
func (s *Session) sameWrite(key, value string) []clientv3.Cmp {
	return []clientv3.Cmp{clientv3.Compare(clientv3.Value(key), "=", value), clientv3.Compare(clientv3.LeaseValue(key), "=", s.keeper.id)}
}

// deleteIfWritten deletes key, in a transaction's Then, only if it holds
// what one acquisition of this session wrote into it (sameWrite).
func (s *Session) deleteIfWritten(key, value string) clientv3.Op {
	return clientv3.OpTxn(s.sameWrite(key, value), []clientv3.Op{clientv3.OpDelete(key)}, nil)
}

// deleteWrites deletes each of ws whose key still holds the value its
// acquisition wrote (deleteIfWritten), in one transaction (in chunks of
// maxTxnOps). It calls answered(i, deleted) for each ws[i] etcd answered
// for, in order, and returns how many that is and the error that stopped
// the rest.
func (s *Session) deleteWrites(ctx context.Context, ws []leftover, answered func(i int, deleted bool)) (int, error) {
	ops := make([]clientv3.Op, len(ws))
	for i, w := range ws {
		ops[i] = s.deleteIfWritten(w.key, w.value)
	}
	done := 0
	err := txnInChunks(ctx, s.client, ops, func(rs []*etcdserverpb.ResponseOp) {
		for _, r := range rs {
			answered(done, r.GetResponseTxn().Succeeded)
			done++
		}
	})
	return done, err
}

// leftoverSweeps is how many sweeps look for a leftover key, and find it not
// there, before it is forgotten, once a TTL has passed since it became a
// leftover (see lookAgain). A sweep that got no answer did not look.
const leftoverSweeps = 3

// lookAgain counts a sweep that looked for st and did not find it, and
// reports whether to look again: until leftoverSweeps sweeps looked and a TTL
// passed since it became a leftover, however short the renewal interval,
// or for as long as the session lives if it is held. A put still in flight
// by then is a network pathology; the lease takes its key, and the
// session's next acquisition of the name replaces it.
func (s *Session) lookAgain(st *leftover) bool {
	st.sweeps++
	return st.held || st.sweeps < leftoverSweeps || s.cfg.clock.Since(st.added) < s.keeper.ttl
}

// sweepLeftovers deletes the leftover keys that have landed, each only if it
// still holds the value its own acquisition wrote, in one transaction (in
// chunks of maxTxnOps). It runs on the renewal loop after a renewal,
// bounded well within the renewal interval.
func (s *Session) sweepLeftovers() {
	s.mu.Lock()
	leftovers := s.ledger.leftovers
	s.ledger.leftovers = nil
	s.mu.Unlock()
	if len(leftovers) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(s.alive, s.keeper.every/4)
	defer cancel()
	var keep []leftover
	done, err := s.deleteWrites(ctx, leftovers, func(i int, deleted bool) {
		st := leftovers[i]
		if deleted {
			s.log.Info("removed a key left by a failed or lost acquisition", zap.String("key", st.key))
		} else if s.lookAgain(&st) {
			keep = append(keep, st)
		}
	})
	// The transaction failed (err) for the rest. With no answer — etcd or
	// this client too slow for the sweep's time, or etcd unreachable —
	// they were not looked for. A refusal counts as a look, so that a
	// delete etcd never allows is not sent forever.
	for _, st := range leftovers[done:] {
		if unanswered(err) || s.lookAgain(&st) {
			keep = append(keep, st)
		}
	}
	s.mu.Lock()
	s.ledger.leftovers = append(s.ledger.leftovers, keep...)
	s.mu.Unlock()
}

// mayLand records that a try of l's acquiring write went unanswered
// (retried): a member that held it may still apply it, even after l's
// keys were deleted.
func (l *Lock) mayLand() { l.unanswered.Store(true) }

// landLate queues l's keys, just deleted (or never written: a try that
// found the name taken), as leftovers if a try of its acquiring write went
// unanswered: a put etcd applies after that would otherwise hold the name
// for the rest of the session.
func (l *Lock) landLate() {
	if !l.unanswered.Load() {
		return
	}
	l.mu.Lock()
	others := l.kind.otherKeys()
	l.mu.Unlock()
	l.s.addLeftovers(l, append([]string{l.key}, others...)...)
}
