package lock

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// MaxLockDelay is the longest delay WithLockDelay accepts.
const MaxLockDelay = time.Hour

// WithLockDelay makes the holder of a name that ended uncleanly — its
// lease expired or was revoked by Break, its key was deleted by someone
// else, its session was abandoned (Session.Abandon) or lost — keep the
// name unavailable for d after the next contender finds out: that
// contender becomes ACTIVE only d later. It is Chubby's and Consul's
// answer to a stale holder's writes still in flight to a resource that no
// token fences. After a clean end — Release, or Session.Close, which is
// how etcdlock run ends — there is no delay. Off (0) by default.
//
// Every holder writes a marker key for the name when it becomes ACTIVE,
// without a lease, and deletes it in the same transaction as its own key
// when it releases (Close deletes its locks' markers before it revokes
// the lease). The next contender to become eligible reads the markers in
// the transaction that writes its own: a marker other than its own is an
// unclean end. It waits d from that read (not from the end, which it
// cannot know: the delay is never shorter than d from the end), deletes
// those markers, and becomes ACTIVE. TryAcquire waits out the delay too.
// A marker whose Release or Close failed to delete it counts as unclean:
// the only cost of a doubt is a delay.
//
// Every contender of a name must use it: a holder without it writes no
// marker. It applies to plain locks (Acquire, TryAcquire); with WithLimit,
// WithShared or AcquireAll it fails with ErrInvalidOption. For NewSession
// (a default for the session's plain locks) and for Acquire and
// TryAcquire; d must be between 0 and MaxLockDelay.
func WithLockDelay(d time.Duration) Option {
	return option{"WithLockDelay", atSession | atAcquire, func(c *config) error {
		if d < 0 || d > MaxLockDelay {
			return invalid("lock delay %v out of range [0, %v]", d, MaxLockDelay)
		}
		c.acquire.lockDelay = d
		return nil
	}}
}

// markersPrefix is the prefix of name's lock-delay markers: like
// slotsPrefix, outside every name's contender range and not a name to
// List.
func markersPrefix(prefix, name string) string {
	return prefix + escapeName(name) + markerSegment + "/"
}

const markerSegment = "%held"

// holdMarker is the lock-delay step of an acquisition whose contender key
// l wrote and that is now eligible: it writes l's marker, reads the
// others, waits the delay if there are any, and deletes them.
func (s *Session) holdMarker(ctx context.Context, l *Lock) error {
	mpfx := markersPrefix(s.cfg.prefix, l.name)
	marker := fmt.Sprintf("%s%x", mpfx, int64(s.lease))
	l.mu.Lock()
	l.marker = marker // for the clean-up, should the reply be lost
	l.mu.Unlock()
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(l.key), "=", int64(l.token))).
		Then(clientv3.OpGet(mpfx, clientv3.WithPrefix()), clientv3.OpPut(marker, l.value)).
		Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return ErrKeyDeleted
	}
	var deletes []clientv3.Op
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		// Another holder's marker, or one of this session's earlier
		// acquisition of the name that ended uncleanly (lost). The delete
		// compares the revision read, so it spares the marker just
		// written over the latter.
		if string(kv.Key) != marker || string(kv.Value) != l.value {
			deletes = append(deletes, clientv3.OpTxn(
				[]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)},
				[]clientv3.Op{clientv3.OpDelete(string(kv.Key))}, nil))
		}
	}
	if len(deletes) == 0 {
		return nil
	}
	d := l.opts.lockDelay
	s.log.Info("the previous holder ended without releasing: waiting out the lock-delay",
		zap.String("name", l.name), zap.Duration("lock-delay", d), zap.Int("markers", len(deletes)))
	t := s.cfg.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
	case <-l.ctx.Done():
		return context.Cause(l.ctx)
	case <-ctx.Done():
		return ctx.Err()
	}
	for len(deletes) > 0 {
		n := min(len(deletes), 64)
		if _, err := s.client.Txn(ctx).Then(deletes[:n]...).Commit(); err != nil {
			return err
		}
		deletes = deletes[n:]
	}
	return nil
}

// markerDeletes are the operations that delete the markers of ls, each
// only if it still holds the record its own acquisition wrote.
func markerDeletes(ls []*Lock) []clientv3.Op {
	var ops []clientv3.Op
	for _, l := range ls {
		l.mu.Lock()
		marker := l.marker
		l.mu.Unlock()
		if marker != "" {
			ops = append(ops, clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Value(marker), "=", l.value)},
				[]clientv3.Op{clientv3.OpDelete(marker)}, nil))
		}
	}
	return ops
}
