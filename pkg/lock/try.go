package lock

import (
	"context"
	"errors"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/internal/keyspace"
)

// TryAcquire acquires name if no one holds it or waits for it, in one round
// trip (more for a reader, a semaphore whose name has keys, or a
// lock-delay: see their options), and otherwise returns a *LockedError (wrapping ErrLocked)
// naming the current holder, leaving no key behind. Like Acquire it never adopts an
// existing key (a leftover of this session's earlier acquisition of name is
// removed and, if the name is then free, replaced by a fresh key), and it
// returns ErrAlreadyClaimed while the session already claims name.
func (s *Session) TryAcquire(ctx context.Context, name string, opts ...AcquireOption) (*Lock, error) {
	l, ctx, stop, err := s.start(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	defer stop()
	pfx := keyspace.Of(s.cfg.prefix, name).Contenders()
	var rev int64
	slot := -1
	switch l.kind.(type) {
	case *slotHold:
		slot, rev, err = s.trySemaphore(ctx, l, pfx)
	case reader:
		rev, err = s.tryShared(ctx, l, pfx)
	default:
		rev, err = s.tryLock(ctx, l, pfx)
	}
	if err != nil {
		return nil, s.failTry(ctx, l, err)
	}
	s.watchKey(l, rev)
	switch h := l.kind.(type) {
	case *slotHold:
		s.holdSlot(l, slot, fencing.Token(rev)) // written with the key
	case *delayHold:
		if err := s.holdMarker(ctx, l, h); err != nil {
			return nil, s.failAcquire(ctx, l, err)
		}
	}
	return s.activated(ctx, l)
}

// tryLock is TryAcquire for a plain lock: it writes l's key only if no key
// exists under the name (a range comparison is true for an empty range),
// and returns the write's revision, or a *LockedError naming the holder.
// A key of this session's earlier acquisition of the name is removed, and
// the name tried again if that key was its holder.
func (s *Session) tryLock(ctx context.Context, l *Lock, pfx string) (int64, error) {
	for {
		resp, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(pfx), "=", 0).WithPrefix()).
			Then(clientv3.OpPut(l.key, l.value, clientv3.WithLease(s.lease))).
			Else(clientv3.OpGet(pfx, clientv3.WithFirstCreate()...), clientv3.OpGet(l.key)).
			Commit()
		if err != nil {
			return 0, err
		}
		if resp.Succeeded {
			return resp.Header.Revision, nil
		}
		holder := resp.Responses[0].GetResponseRange().Kvs[0]
		mine := resp.Responses[1].GetResponseRange().Kvs
		if len(mine) == 0 {
			return 0, lockedError(l.name, holder)
		}
		// Left by an earlier acquisition: never adopted.
		if err := s.removeLeftover(ctx, mine[0]); err != nil {
			return 0, err
		}
		if string(holder.Key) != l.key {
			return 0, lockedError(l.name, holder)
		}
	}
}

// failTry ends a TryAcquire that failed with err: one that found the name
// taken (a *LockedError) or of another kind (ErrLimitMismatch) wrote no
// key, or removed it, and only drops its claim; any other is a failed
// acquisition (failAcquire).
func (s *Session) failTry(ctx context.Context, l *Lock, err error) error {
	var locked *LockedError
	if errors.As(err, &locked) || errors.Is(err, ErrLimitMismatch) {
		s.unclaim(l)
		l.finish(StateReleased, ErrReleased)
		return err
	}
	return s.failAcquire(ctx, l, err)
}
