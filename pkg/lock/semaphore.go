package lock

import (
	"context"
	"fmt"
	"slices"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/internal/keyspace"
	"github.com/etcdlock/etcdlock/pkg/internal/watchmux"
)

// maxLimit is the largest limit WithLimit accepts.
const maxLimit = 1 << 16

// WithLimit makes an acquisition a holder of a semaphore: at most n holders
// of the name at once, in FIFO order, each in one of n slots (Lock.Slot),
// with its slot key's token (Lock.Key). Every contender of a name must use
// the same limit, else ErrLimitMismatch. An AcquireOption, for Acquire and
// TryAcquire, not with WithShared; n in [1, 65536].
func WithLimit(n int) forAcquire {
	return func(c *config) error {
		if n < 1 || n > maxLimit {
			return invalid("limit %d out of range [1, %d]", n, maxLimit)
		}
		c.acquire.limit = n
		return nil
	}
}

// Slot returns the holder's slot of a semaphore (WithLimit), in [0, n);
// -1 for a lock acquired without a limit above 1.
func (l *Lock) Slot() int {
	h, ok := l.kind.(*slotHold)
	if !ok || h.key == "" {
		return -1
	}
	return h.n
}

// slotHold is the kind of a semaphore's contender (WithLimit): its limit,
// then its slot. key is "" until a slot is held; then token, the slot
// key's create revision, is the lock's token (Lock.rev stays the
// contender key's). unconfirmed lists the slot keys that a claim whose reply
// has not come may have written (see setUnconfirmed). Guarded by Lock.mu,
// but for limit, which never changes.
type slotHold struct {
	noKeys
	limit       int
	n           int
	key         string
	token       fencing.Token
	unconfirmed []string
	landable    []string        // slot keys a try held unanswered may write (mayLand)
	keyWatch    *watchmux.Watch // on key, once held
}

// queue sends the acquiring transaction of a semaphore's contender: each
// claims a slot with l's contender key when it can, and otherwise queues
// l (claimOrQueue), but for a first probe, when the session's last
// acquisition of the name found it free (not contended), which claims slot 0 or
// only reads (probeSemaphore). See "Semaphore" in DESIGN.md.
func (h *slotHold) queue(ctx context.Context, l *Lock) (queued, []*mvccpb.KeyValue, error) {
	s := l.s
	if s.contended(l.name) {
		q, leftovers, err := h.claimOrQueue(ctx, l, 0, l.emptyName())
		if q.claimed {
			s.setContended(l.name, false)
		}
		return q, leftovers, err
	}
	rev, claimed, queue, slots, err := h.probeSemaphore(ctx, l)
	if err != nil || claimed {
		return queued{rev: rev, claimed: claimed}, nil, err
	}
	s.setContended(l.name, true)
	if i := indexOfKey(queue, l.key); i >= 0 {
		return queued{}, queue[i : i+1], nil
	}
	if slots, err = s.removeOwnSlots(ctx, slots); err != nil {
		return queued{}, nil, err
	}
	if err := checkLimits(l, h.limit, queue); err != nil {
		return queued{}, nil, err
	}
	order := slotOrder(l.keys(), h.limit, queue, slots, 1)
	if len(queue) >= h.limit || len(order) == 0 {
		return h.claimOrQueue(ctx, l, -1, nil)
	}
	return h.claimOrQueue(ctx, l, order[0], l.stillFree(rev, order[0]))
}

// wait returns once l holds a slot: at once if the acquiring transaction
// claimed one; else it checks the older keys' limits, waits until fewer
// than its limit are older (waitRank), and claims a free slot
// (claimSlot).
func (h *slotHold) wait(ctx context.Context, l *Lock, q queued) error {
	s := l.s
	if q.claimed {
		h.holdSlot(l, q.slot, fencing.Token(q.rev))
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
	older, slots, err := h.waitRank(ctx, l, q.older.Kvs, q.slots)
	if err != nil {
		return err
	}
	slot, tok, err := h.claimSlot(ctx, l, older, slots)
	if err != nil {
		return err
	}
	h.holdSlot(l, slot, tok)
	return nil
}

// try is TryAcquire for a semaphore: the probe (probeSemaphore) claims
// slot 0 of a name without keys; else, unless the name has its limit of
// contenders or no free slot (a *LockedError naming the oldest holder),
// one transaction writes l's contender key and the key of the free slot
// that slotOrder puts first if no key under the name was written since
// the probe read it (takeSlot).
func (h *slotHold) try(ctx context.Context, l *Lock) (queued, error) {
	for {
		rev, claimed, queue, slots, err := h.probeSemaphore(ctx, l)
		if err != nil || claimed {
			return queued{rev: rev, claimed: true}, err
		}
		removed, err := l.removeOwnKeys(ctx, queue, slots)
		if err != nil {
			return queued{}, err
		}
		if removed {
			continue
		}
		if err := checkLimits(l, h.limit, queue); err != nil {
			return queued{}, err
		}
		order := slotOrder(l.keys(), h.limit, queue, slots, 1)
		if len(queue) >= h.limit || len(order) == 0 {
			return queued{}, semaphoreHolder(l.name, queue, slots)
		}
		if rev, ok, err := h.takeSlot(ctx, l, rev, order[0]); err != nil || ok {
			return queued{rev: rev, claimed: true, slot: order[0]}, err
		}
	}
}

// holder is the slot key held and its token; the contender key and its
// create revision until a slot is held.
func (h *slotHold) holder(l *Lock) (string, fencing.Token) {
	if h.key != "" {
		return h.key, h.token
	}
	return l.key, fencing.Token(l.rev)
}

func (h *slotHold) end(bool) []*watchmux.Watch {
	w := h.keyWatch
	h.keyWatch = nil
	return []*watchmux.Watch{w}
}

// otherKeys is the slot key held, if any, and those a claim may have
// written (setUnconfirmed) or may still write (mayLand).
func (h *slotHold) otherKeys() []string {
	keys := slices.Concat(h.unconfirmed, h.landable)
	if h.key == "" {
		return keys
	}
	return append([]string{h.key}, keys...)
}

// deleteOps deletes the slot key held by its create revision, the token,
// or else the slot keys a claim whose reply was lost may have written by
// their value, unique to this acquisition (keyspace.Record.Seq).
func (h *slotHold) deleteOps(l *Lock) []clientv3.Op {
	if h.key != "" {
		return []clientv3.Op{deleteIfCreated(h.key, int64(h.token))}
	}
	ops := make([]clientv3.Op, len(h.unconfirmed))
	for i, key := range h.unconfirmed {
		ops[i] = l.s.deleteIfWritten(key, l.value)
	}
	return ops
}

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

// semaphoreHolder is the *LockedError of a full semaphore: its oldest
// holder, with its slot key's token, as Inspect reports it.
func semaphoreHolder(name string, queue, slots []*mvccpb.KeyValue) *LockedError {
	bySlot := keyspace.SlotsByValue(slots)
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
func (l *Lock) removeOwnKeys(ctx context.Context, queue, slots []*mvccpb.KeyValue) (bool, error) {
	s := l.s
	if i := indexOfKey(queue, l.key); i >= 0 {
		return true, s.removeLeftover(ctx, queue[i])
	}
	kept, err := s.removeOwnSlots(ctx, slots)
	return len(kept) < len(slots), err
}

func indexOfKey(kvs []*mvccpb.KeyValue, key string) int {
	for i, kv := range kvs {
		if string(kv.Key) == key {
			return i
		}
	}
	return -1
}

// maxContendedNames bounds claimTable.contended: beyond it, a name's acquisitions are
// sent as if it were free, which costs a round trip when it is not.
const maxContendedNames = 1024

// contended reports whether the session's last acquisition of the semaphore
// name found keys under it (setContended).
func (s *Session) contended(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.claims.contended[name]
	return ok
}

// setContended records whether an acquisition of the semaphore name found keys
// under it, for the next acquisition's first transaction (slotHold.queue):
// a guess, never a guarantee; either transaction is correct.
func (s *Session) setContended(name string, contended bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case !contended:
		delete(s.claims.contended, name)
	case s.claims.contended == nil:
		s.claims.contended = map[string]struct{}{name: {}}
	case len(s.claims.contended) < maxContendedNames:
		s.claims.contended[name] = struct{}{}
	}
}
