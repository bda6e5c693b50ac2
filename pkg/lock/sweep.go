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
// lock of several keys still has after it was lost (see Lock.lose). The
// renewal loop deletes it, by its exact value, after the next few
// renewals.
type leftover struct {
	key, value string
	added      time.Time // on the session's clock
	sweeps     int       // sweeps that looked for it and did not find it
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
// passed since it became a leftover, however short the renewal interval. A
// put still in flight by then is a network pathology; the lease takes its
// key, and the session's next acquisition of the name replaces it.
func (s *Session) lookAgain(st *leftover) bool {
	st.sweeps++
	return st.sweeps < leftoverSweeps || s.cfg.clock.Since(st.added) < s.keeper.ttl
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
