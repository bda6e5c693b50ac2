package lock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/pkg/internal/backoff"
	"github.com/etcdlock/etcdlock/pkg/internal/keyspace"
)

// ctxEnded is ctx.Err(), or context.DeadlineExceeded once ctx's deadline
// has passed: ctx.Err() reports a deadline only after the timer that
// cancels ctx has run, which on a loaded machine can come after etcd's
// reply to a request that carried the same deadline.
func ctxEnded(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// asCtxErr returns err, or once ctx has ended an error matching ctx's
// error with err kept in the chain. A request in flight when the caller's
// ctx ends may be answered by etcd's own "request timed out" (the deadline
// travels with the request) before the client's deadline error: the caller
// still gets ctx's error.
func asCtxErr(ctx context.Context, err error) error {
	if cerr := ctxEnded(ctx); cerr != nil && err != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w (%w)", cerr, err)
	}
	return err
}

// failAcquire ends a failed acquisition, whose requests ran on ctx: it
// stops l, removes its keys (on a fresh, bounded context), and returns err
// annotated, or the session's, lock's or ctx's error when that explains
// the failure better.
func (l *Lock) failAcquire(ctx context.Context, err error) error {
	s := l.s
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		s.leaseGone(err)
	}
	if cause := context.Cause(l.ctx); cause != nil && cause != context.Canceled {
		// l ended — the session was lost or closed, or l's key deleted —
		// which canceled the acquisition's requests (bind): that is why
		// it failed, whatever error its last request returned.
		err = cause
	} else {
		err = asCtxErr(ctx, err)
	}
	l.finish(stateReleased, ErrReleased)
	defer s.unclaim(l) // after the delete, so the next claim usually finds no leftover
	l.removeFailed()
	if err == nil {
		return nil
	}
	return fmt.Errorf("lock: acquire %q: %w", l.name, err)
}

// removeFailed removes the keys of l, a failed acquisition, on a fresh
// context bounded by the cleanup timeout; what it cannot remove goes with
// the lease.
func (l *Lock) removeFailed() {
	s := l.s
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.cleanupTimeout)
	defer cancel()
	var err error
	switch {
	case errors.Is(s.Err(), ErrSessionLost):
		// The session was lost: its lease, no longer renewed, expires
		// by its TTL (or has) and takes l's keys with it; a delete would
		// only wait for an etcd the session could not reach. After Close
		// or Abandon the delete runs: Close's revoke may fail (its ctx
		// done), and a waiter's key would then block the name for a TTL.
	case l.rev != 0:
		if err = l.deleteKeys(ctx, false); err == nil {
			l.landLate()
		}
	default:
		err = l.removeUnconfirmed(ctx)
	}
	if err != nil {
		s.keepForClose(l) // its lock-delay marker, if any, was a clean end's
		s.log.Warn("could not remove abandoned key; it goes away with the lease", zap.String("key", l.key), zap.Error(err))
	}
}

// removeUnconfirmed removes the keys of l, whose acquiring write's reply
// was lost: they may or may not exist. The delete compares the value this
// acquisition wrote (unique within the lease, see keyspace.Record.Seq), so even
// arriving late it cannot remove the key of this session's next
// acquisition of the name. It is a write, which etcd orders after a put it
// received first (a read could be served before that put is applied).
//
// etcd may still apply a put it received after the clean-up (the two
// requests race on the server, or the put was delayed in the network): the
// key is then a leftover, which the renewal loop deletes after the next
// renewals (sweepLeftovers), and which the session's next acquisition of the
// name would replace. A semaphore's contender that claims a slot with its
// contender key (claimOps: when the name has no key, or after a read that
// found a slot free), and a semaphore's TryAcquire, write the slot key in
// the same transaction, with the same value: it is deleted likewise.
func (l *Lock) removeUnconfirmed(ctx context.Context) error {
	s := l.s
	l.mu.Lock()
	keys := append([]string{l.key}, l.kind.otherKeys()...)
	l.mu.Unlock()
	// One transaction for all of them (up to maxTxnOps): a semaphore's
	// contender key and the slot keys its transaction may have written
	// go together, so a clean-up cut off midway leaves no slot taken.
	ws := make([]leftover, len(keys))
	for i, key := range keys {
		ws[i] = leftover{key: key, value: l.value}
	}
	done, err := s.deleteWrites(ctx, ws, func(i int, deleted bool) {
		if !deleted {
			s.addLeftovers(l, keys[i]) // not written yet: a late write may still land
		}
	})
	s.addLeftovers(l, keys[done:]...)
	return err
}

// removeLeftover deletes kv, a key of this session's lease under a name
// the session is claiming now, which an earlier acquisition of that name
// left behind. The compare on kv's create revision makes the delete exact:
// it can remove only that earlier key, never one written after it. For a
// contender key, the earlier acquisition's lock-delay marker, if it wrote
// one, goes in the same transaction, whatever kind the new acquisition
// is: the key still being there, nobody else held the name since, and
// the earlier lock ended cleanly (its Release failed, or is still in
// flight).
func (s *Session) removeLeftover(ctx context.Context, kv *mvccpb.KeyValue) error {
	s.log.Debug("removing a key left by an earlier acquisition", zap.String("key", string(kv.Key)), zap.Int64("token", kv.CreateRevision))
	del := []clientv3.Op{clientv3.OpDelete(string(kv.Key))}
	if name, kind := keyspace.Parse(s.cfg.prefix, string(kv.Key)); kind == keyspace.Contender {
		del = append(del, clientv3.OpDelete(keyspace.Of(s.cfg.prefix, name).Marker(int64(s.keeper.id), kv.CreateRevision)))
	}
	_, err := retried(ctx, s.client, nil, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return s.client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(string(kv.Key)), "=", kv.CreateRevision)).Then(del...).Commit()
	})
	if err != nil {
		return fmt.Errorf("remove key left by an earlier acquisition: %w", err)
	}
	return nil
}

// beforeRevoke returns what Close deletes for the locks in ls before it
// revokes the lease (kind.closeOps): their clean ends' lock-delay
// markers.
func beforeRevoke(ls []*Lock) []clientv3.Op {
	var ops []clientv3.Op
	for _, l := range ls {
		l.mu.Lock()
		ops = append(ops, l.kind.closeOps(l)...)
		l.mu.Unlock()
	}
	return ops
}

// deleteMarkers commits ops, Close's deletes of lock-delay markers, again
// while etcd is unavailable and ctx lasts: each compares the marker's
// value and its key's create revision, so a delete that landed before
// its reply was lost makes its retry a no-op.
func (s *Session) deleteMarkers(ctx context.Context, ops []clientv3.Op) error {
	b := backoff.Backoff{Min: 50 * time.Millisecond, Max: time.Second, Jitter: true}
	for {
		err := commitInChunks(ctx, s.client, ops)
		if err == nil || !retryableRead(err) {
			return err
		}
		if backoff.Sleep(ctx, b.Next()) != nil {
			return err
		}
	}
}
