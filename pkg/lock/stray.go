package lock

import (
	"context"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// stray is the key of a failed acquisition whose put may still land after
// its clean-up ran (see Session.failAcquire), or a key that a lock of
// several keys still has after it was lost (see Lock.lose): the renewal
// loop deletes it, by its exact value, after the next few renewals.
type stray struct {
	key, value string
	added      time.Time // on the session's clock
	sweeps     int       // sweeps that looked for it and did not find it
	// held is set for a key of an acquisition one of whose writes a
	// member held unanswered (Lock.mayLand): a member that thaws after
	// any wait delivers it, so it is looked for as long as the session
	// lives (up to maxHeldStrays of them).
	held bool
}

// sameWrite compares key with what one acquisition of this session wrote
// into it: its value (unique within the lease, see Record.Seq) under this
// session's lease.
func (s *Session) sameWrite(key, value string) []clientv3.Cmp {
	return []clientv3.Cmp{clientv3.Compare(clientv3.Value(key), "=", value), clientv3.Compare(clientv3.LeaseValue(key), "=", s.lease)}
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
func (s *Session) deleteWrites(ctx context.Context, ws []stray, answered func(i int, deleted bool)) (int, error) {
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

// addStrays queues keys that l may have written for the renewal loop to
// delete (see sweepStrays).
func (s *Session) addStrays(l *Lock, keys ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.clock.Now()
	held := l.unanswered.Load()
	for _, key := range keys {
		s.strays = append(s.strays, stray{key: key, value: l.value, added: now, held: held})
	}
	if held {
		s.forgetOldestHeld()
	}
}

// maxHeldStrays bounds the held strays the session keeps looking for: a
// sweep of them all is one transaction.
const maxHeldStrays = maxTxnOps

// forgetOldestHeld forgets the oldest held strays beyond maxHeldStrays
// (s.mu held).
func (s *Session) forgetOldestHeld() {
	n := 0
	for _, st := range s.strays {
		if st.held {
			n++
		}
	}
	for i := 0; n > maxHeldStrays && i < len(s.strays); {
		if !s.strays[i].held {
			i++
			continue
		}
		s.log.Warn("forgetting a key a member held unanswered: should it land, it holds its name until the session's next acquisition of it, or its end", zap.String("key", s.strays[i].key))
		s.strays = append(s.strays[:i], s.strays[i+1:]...)
		n--
	}
}

// sweepSoon asks the renewal loop to sweep the strays now rather than
// after its next renewal.
func (s *Session) sweepSoon() {
	select {
	case s.sweepNow <- struct{}{}:
	default:
	}
}

// straySweeps is how many sweeps look for a stray key, and find it not
// there, before it is forgotten, once a TTL has passed since it became a
// stray (see lookAgain). A sweep that got no answer did not look.
const straySweeps = 3

// lookAgain counts a sweep that looked for st and did not find it, and
// reports whether to look again: until straySweeps sweeps looked and a TTL
// passed since it became a stray, however short the renewal interval, or
// for as long as the session lives if it is held. A put still in flight by
// then is a network pathology; the lease takes its key, and the session's
// next acquisition of the name replaces it.
func (s *Session) lookAgain(st *stray) bool {
	st.sweeps++
	return st.held || st.sweeps < straySweeps || s.cfg.clock.Since(st.added) < s.ttl
}

// sweepStrays deletes the stray keys that have landed, each only if it
// still holds the value its own acquisition wrote, in one transaction (in
// chunks of maxTxnOps). It runs on the renewal loop after a renewal,
// bounded well within the renewal interval.
func (s *Session) sweepStrays() {
	s.mu.Lock()
	strays := s.strays
	s.strays = nil
	s.mu.Unlock()
	if len(strays) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(s.alive, s.every/4)
	defer cancel()
	var keep []stray
	done, err := s.deleteWrites(ctx, strays, func(i int, deleted bool) {
		st := strays[i]
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
	for _, st := range strays[done:] {
		if unanswered(err) || s.lookAgain(&st) {
			keep = append(keep, st)
		}
	}
	s.mu.Lock()
	s.strays = append(s.strays, keep...)
	s.mu.Unlock()
}

// mayLand records that a try of l's acquiring write went unanswered
// (retried): a member that held it may still apply it, even after l's
// keys were deleted.
func (l *Lock) mayLand() { l.unanswered.Store(true) }

// landLate queues l's keys, just deleted (or never written: a try that
// found the name taken), as strays if a try of its acquiring write went
// unanswered: a put etcd applies after that would otherwise hold the name
// for the rest of the session.
func (s *Session) landLate(l *Lock) {
	if !l.unanswered.Load() {
		return
	}
	l.mu.Lock()
	others := l.kind.otherKeys()
	l.mu.Unlock()
	s.addStrays(l, append([]string{l.key}, others...)...)
}
