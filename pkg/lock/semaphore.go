package lock

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/internal/keyspace"
)

// MaxLimit is the largest limit WithLimit accepts.
const MaxLimit = 1 << 16

// WithLimit makes an acquisition a holder of a semaphore: at most n
// sessions hold the name at once (n = 1 is a mutex, the default). Waiters
// are served in FIFO order of their keys' creation: a contender becomes
// eligible when fewer than n older keys remain under the name.
//
// Each holder owns one of n slots, numbered 0 to n-1 (Lock.Slot), each an
// etcd key of its own claimed with a compare on its absence, so no two
// holders ever own one slot and no more than n keys can ever be held. The
// holder's token is its slot key's create revision (Lock.Key is the slot
// key): strictly increasing per slot, so a resource split into n parts can
// fence each part with the slot's tokens, by the existing guards, with
// the name and slot as the guard's key.
//
// Acquire's first transaction is If(no contender key and no slot key
// under the name) Then(put the contender key and slot 0's key). On a name
// without keys that is the whole acquisition, and with Release an
// uncontended cycle costs two requests, as for a plain lock; the token is
// then also the contender key's create revision. What the transaction
// does otherwise depends on what the session's last acquisition of the
// name found (a guess, kept for up to 1024 names; either way is correct):
//
//   - After a free name, or on a new session: its Else reads the name's
//     contender keys and slot keys, and writes nothing, so the request
//     carries its writes once. A second transaction then claims a free
//     slot with the contender key if the read found fewer contenders than
//     the limit and a free slot, no contender key was written since the
//     read and the slot is still free; otherwise it queues (below).
//   - After a name with keys: its Else queues: put the contender key if
//     it is absent, read the older contender keys and the slot keys. So a
//     name contended at every acquisition costs no extra request; the
//     first acquisition that finds keys after the name was free costs one.
//
// A queued contender that is eligible claims a slot in one more
// transaction: If(its contender key is unchanged) Then(for up to 8 free
// slots, one after another, nested: If(the slot key is absent) Then(put
// it)). It starts at the free slot at its rank among the older contenders
// without a slot, so that contenders eligible together claim different
// slots, and tries again only when every slot it tried was taken
// meanwhile. TryAcquire sends the first transaction with the reads as its
// Else, and otherwise writes its contender key and a free slot's key in
// one transaction if nothing under the name changed since that read.
// Every key is written under the session's lease, and no transaction puts
// a contender key that exists: each put is conditional on the key's
// absence or on no contender key written since a read that did not find
// it. When a reply is lost, the failed acquisition's clean-up deletes its
// contender key and each slot key the transaction may have written, each
// only if it still holds the value this acquisition wrote.
//
// A waiter reads the queue in the acquiring transaction and once more when
// its watch is created, then counts the deletions of older keys from one
// range watch on the session's watch stream: a release costs every waiter
// one watch event and no read. The waiter reads again only when the watch
// breaks (a broken stream, a member that lost its leader) and once the
// events say it is eligible.
//
// Every contender of a name must use the same limit. A semaphore
// acquisition that finds an older key of the name with another limit — or
// of a plain lock, a reader or another lock client — fails with
// ErrLimitMismatch, and so does a plain Acquire, a reader or an AcquireAll
// that finds a semaphore's key as its newest predecessor under the name,
// when it queues or at any read while it waits (it would get its token
// before the semaphore's holders claimed their slots, so a lower one). A
// plain TryAcquire (or one WithLimit(1)) never queues: on a name that a
// semaphore holds it returns a *LockedError, as on any held name.
// The check is a guard against misuse, not an ordering guarantee: a
// contender queued behind another kind's transient key (one being
// refused) can miss it. Tokens of different kinds on one name are not
// ordered against each other; fence a semaphore's resources by slot. Each refused acquisition removes the key it wrote; while
// that key exists a concurrent contender of the name's own kind may be
// refused too. So holders never mix kinds or limits, and changing a
// name's limit takes draining its queue first. WithLimit and WithShared
// cannot be combined.
//
// A holder lost because one of its two keys was deleted (Break, an
// operator) has the other deleted by the session at once; a key left by a
// failed Release is replaced by the session's next acquisition of the
// name, as for a lock, and goes away with the lease in any case.
//
// An AcquireOption, for Acquire and TryAcquire (AcquireAll rejects a
// limit above 1). n must be between 1 and MaxLimit.
func WithLimit(n int) LimitOption { return LimitOption{n} }

// LimitOption is what WithLimit returns: an AcquireOption.
type LimitOption struct{ n int }

func (o LimitOption) set(c *config) error {
	if o.n < 1 || o.n > MaxLimit {
		return invalid("limit %d out of range [1, %d]", o.n, MaxLimit)
	}
	c.acquire.limit = o.n
	return nil
}

func (LimitOption) acquireOption() {}

// Slot returns the holder's slot of a semaphore (WithLimit), in [0, n);
// -1 for a lock acquired without a limit above 1.
func (l *Lock) Slot() int {
	h := l.semaphore()
	if h == nil || h.key == "" {
		return -1
	}
	return h.n
}

// semaphore reports whether ac acquires a semaphore.
func (ac acquireConfig) semaphore() bool { return ac.limit > 1 }

// checkLimits fails with ErrLimitMismatch if a key in older — keys older
// than l's under its name — was written with another limit than l's,
// limit (a plain lock, a reader, another lock client, or a semaphore of
// another limit).
func checkLimits(l *Lock, limit int, older []*mvccpb.KeyValue) error {
	for _, kv := range older {
		r, ok := keyspace.Decode(kv.Value)
		lim := max(r.Limit, 1)
		if !ok || r.Shared || lim != limit {
			what := fmt.Sprintf("limit %d", lim)
			switch {
			case !ok:
				what = "a key of another lock client"
			case r.Shared:
				what = "a reader of a read-write lock"
			}
			return fmt.Errorf("%w: %q is held or awaited with %s (key %s), not limit %d", ErrLimitMismatch, l.name, what, kv.Key, limit)
		}
	}
	return nil
}

// behindSemaphore fails with ErrLimitMismatch if pred, the newest key
// older than a plain lock's or a reader's, is a semaphore's. Together with
// checkLimits it keeps every name's queue of one kind: a contender that
// queued behind semaphore holders would otherwise get its token before
// theirs (a slot's token is written when the slot is claimed, after the
// holder queued), and a fenced resource would refuse it.
func behindSemaphore(l *Lock, pred *mvccpb.KeyValue) error {
	if r, _ := keyspace.Decode(pred.Value); r.Limit > 1 {
		return fmt.Errorf("%w: %q is held or awaited as a semaphore of limit %d (key %s)", ErrLimitMismatch, l.name, r.Limit, pred.Key)
	}
	return nil
}

// trySemaphore is TryAcquire for a semaphore. When the name has no key,
// it writes l's contender key and slot 0's in one transaction
// (probeSemaphore). Otherwise that transaction reads the queue and the slots
// instead: trySemaphore fails with a *LockedError naming the oldest
// holder if the name has its limit of contenders or no free slot, and
// otherwise writes l's contender key and the key of the free slot that
// slotOrder puts first in one transaction, if no key under the name was
// written since the read. It returns the slot and the write's revision.
func (s *Session) trySemaphore(ctx context.Context, l *Lock, pfx string) (slot int, rev int64, err error) {
	for {
		rev, claimed, queue, slots, err := s.probeSemaphore(ctx, l, pfx)
		if err != nil || claimed {
			return 0, rev, err
		}
		removed, err := s.removeOwnKeys(ctx, l, queue, slots)
		if err != nil {
			return 0, 0, err
		}
		if removed {
			continue
		}
		limit := l.semaphore().limit
		if err := checkLimits(l, limit, queue); err != nil {
			return 0, 0, err
		}
		order := slotOrder(keyspace.Of(s.cfg.prefix, l.name), limit, queue, slots, 1)
		if len(queue) >= limit || len(order) == 0 {
			return 0, 0, semaphoreHolder(l.name, queue, slots)
		}
		if rev, ok, err := s.takeSlot(ctx, l, pfx, rev, order[0]); err != nil || ok {
			return order[0], rev, err
		}
	}
}

// semaphoreHolder is the *LockedError of a full semaphore: its oldest
// holder, with its slot key's token, as Inspect reports it.
func semaphoreHolder(name string, queue, slots []*mvccpb.KeyValue) *LockedError {
	bySlot := slotsByValue(slots)
	for _, kv := range queue {
		if sk, ok := bySlot[string(kv.Value)]; ok && sk.Lease == kv.Lease {
			e := lockedError(name, kv)
			e.Token = fencing.Token(sk.CreateRevision)
			return e
		}
	}
	if len(slots) > 0 {
		// Every slot is held by a holder whose contender key is gone
		// (broken, or deleted by hand): the slot keys hold the same
		// records.
		return lockedError(name, slots[0])
	}
	return lockedError(name, queue[0])
}

// removeOwnKeys removes the keys this session's earlier acquisition of l's
// name left in queue (its contender key) or slots (its slot keys), and
// reports whether there were any: the name must then be read again.
func (s *Session) removeOwnKeys(ctx context.Context, l *Lock, queue, slots []*mvccpb.KeyValue) (bool, error) {
	if i := indexOfKey(queue, l.key); i >= 0 {
		return true, s.removeLeftover(ctx, queue[i])
	}
	kept, err := s.removeOwnSlots(ctx, slots)
	return len(kept) < len(slots), err
}

// takeSlot writes l's contender key and the key of slot in one
// transaction, if stillFree holds, and returns the write's revision; ok is false if
// the transaction did not apply.
func (s *Session) takeSlot(ctx context.Context, l *Lock, pfx string, read int64, slot int) (rev int64, ok bool, err error) {
	txn, err := s.client.Txn(ctx).If(s.stillFree(l, pfx, read, slot)...).Then(s.claimOps(l, slot)...).Commit()
	if err != nil {
		return 0, false, err
	}
	if txn.Succeeded {
		return txn.Header.Revision, true, nil
	}
	l.setClaiming()
	return 0, false, nil
}

func indexOfKey(kvs []*mvccpb.KeyValue, key string) int {
	for i, kv := range kvs {
		if string(kv.Key) == key {
			return i
		}
	}
	return -1
}

// acquireSlot is the rest of Acquire for a semaphore's contender l, of
// kind h, whose key is queued (q): unless a slot was claimed with the key
// already (queueSemaphore), it checks the older keys' limits, waits until
// fewer than its limit are older, and claims a free slot.
func (s *Session) acquireSlot(ctx context.Context, l *Lock, h *slotHold, pfx string, q queued) error {
	if q.claimed {
		s.holdSlot(l, q.slot, fencing.Token(q.rev))
		return nil
	}
	if err := checkLimits(l, h.limit, q.older.Kvs); err != nil {
		return err
	}
	kept, err := s.removeOwnSlots(ctx, q.slots.Kvs)
	if err != nil {
		return err
	}
	q.slots.Kvs = kept
	older, slots, err := s.waitRank(ctx, l, pfx, q.older.Kvs, q.slots)
	if err != nil {
		return err
	}
	slot, tok, err := s.claimSlot(ctx, l, pfx, older, slots)
	if err != nil {
		return err
	}
	s.holdSlot(l, slot, tok)
	return nil
}
