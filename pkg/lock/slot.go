package lock

import (
	"context"
	"slices"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/internal/watchmux"
	"github.com/etcdlock/etcdlock/pkg/lock/internal/keyspace"
)

// slotsOp reads name's slot keys. Not keys-only: etcd's keys-only range
// leaves out the lease, which tells this session's own slot keys and
// whose contender key holds each slot.
func slotsOp(prefix, name string) clientv3.Op {
	return clientv3.OpGet(keyspace.Of(prefix, name).Slots(), clientv3.WithPrefix())
}

// removeOwnSlots deletes the slot keys of this session's lease from
// slots, a listing of the slot keys of a name the session is acquiring
// now: an earlier acquisition of the name left them (its Release failed,
// or it was lost when its contender key was deleted), and one session
// never holds two slots of a name. It returns the listing without them.
func (s *Session) removeOwnSlots(ctx context.Context, slots []*mvccpb.KeyValue) ([]*mvccpb.KeyValue, error) {
	kept := slots[:0:0]
	for _, kv := range slots {
		if clientv3.LeaseID(kv.Lease) != s.lease {
			kept = append(kept, kv)
			continue
		}
		if err := s.removeLeftover(ctx, kv); err != nil {
			return nil, err
		}
	}
	return kept, nil
}

// firstHolder returns the comparisons and writes with which l, a
// semaphore's contender, claims slot 0 in the transaction that queues it
// when its name has no key at all: no contender key under pfx (no holder
// or waiter of any kind, no key this session left) and no slot key (a
// holder whose contender key is gone still has its slot). etcd compares
// every key of a range, and the range's absent key when it is empty, so
// a create revision of 0 over a range holds exactly when the range is
// empty. The writes put l's contender key and slot 0's key, under the
// session's lease, at one revision: l's token. No contender is older, so
// l is first in FIFO order; no slot is held, and slot 0's new key is
// created after every earlier holder's of that slot.
//
// It records slot 0's key as l's claim first (setClaiming); the caller
// clears it when the transaction did not claim.
func (s *Session) firstHolder(l *Lock, pfx string) (empty []clientv3.Cmp, claim []clientv3.Op) {
	keys := keyspace.Of(s.cfg.prefix, l.name)
	l.setClaiming(keys.Slot(0))
	empty = []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(pfx), "=", 0).WithPrefix(),
		clientv3.Compare(clientv3.CreateRevision(keys.Slots()), "=", 0).WithPrefix(),
	}
	claim = []clientv3.Op{
		clientv3.OpPut(l.key, l.value, clientv3.WithLease(s.lease)),
		clientv3.OpPut(keys.Slot(0), l.value, clientv3.WithLease(s.lease)),
	}
	return empty, claim
}

// queueSemaphore is queue for a semaphore's contender l: when the name
// has no key at all, its transaction claims slot 0 (firstHolder);
// otherwise it queues l as queue does, and reads the slot keys too.
func (s *Session) queueSemaphore(ctx context.Context, l *Lock, pfx string) (queued, *mvccpb.KeyValue, error) {
	absent, then, mine := s.queueOps(l, pfx)
	then = append(then, slotsOp(s.cfg.prefix, l.name))
	empty, claim := s.firstHolder(l, pfx)
	resp, err := s.client.Txn(ctx).If(empty...).Then(claim...).Else(clientv3.OpTxn(absent, then, mine)).Commit()
	if err != nil {
		return queued{}, nil, err
	}
	if resp.Succeeded {
		return queued{rev: resp.Header.Revision, claimed: true}, nil, nil
	}
	l.setClaiming()
	r := resp.Responses[0].GetResponseTxn()
	q, leftover := queuedBy(resp.Header.Revision, r)
	if leftover == nil {
		q.slots = r.Responses[2].GetResponseRange()
		q.slots.Header = resp.Header
	}
	return q, leftover, nil
}

// setClaiming records keys, before a claim that may write one of them is
// sent, as the slot keys l may have written until the reply comes (none:
// the reply came and l claimed none). The clean-up of an acquisition whose
// claim's reply is lost deletes them by the value l wrote
// (removeUnconfirmed, deleteKeys), which no other write has.
func (l *Lock) setClaiming(keys ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.semaphore().claiming = keys
}

// slotHold is the kind of a semaphore's contender (WithLimit): its limit,
// then its slot. key is "" until a slot is held; then token, the slot
// key's create revision, is the lock's token (Lock.rev stays the
// contender key's). claiming lists the slot keys that a claim whose reply
// has not come may have written (see setClaiming). Guarded by Lock.mu,
// but for limit, which never changes.
type slotHold struct {
	limit    int
	n        int
	key      string
	token    fencing.Token
	claiming []string
	watch    *watchmux.Watch
}

func (h *slotHold) end(bool) []*watchmux.Watch {
	w := h.watch
	h.watch = nil
	return []*watchmux.Watch{w}
}

// otherKeys is the slot key held, if any, and those a claim may have
// written (setClaiming).
func (h *slotHold) otherKeys() []string {
	if h.key == "" {
		return h.claiming
	}
	return append([]string{h.key}, h.claiming...)
}

// deleteOps deletes the slot key held by its create revision, the token,
// or else the slot keys a claim whose reply was lost may have written by
// their value, unique to this acquisition (Record.Seq).
func (h *slotHold) deleteOps(l *Lock) []clientv3.Op {
	if h.key != "" {
		return []clientv3.Op{deleteIfCreated(h.key, int64(h.token))}
	}
	ops := make([]clientv3.Op, len(h.claiming))
	for i, key := range h.claiming {
		ops[i] = l.s.deleteIfWritten(key, l.value)
	}
	return ops
}

// maxSlotTries is how many free slots one claim transaction tries, one
// after another, in nested transactions.
const maxSlotTries = 8

// claimSlot gives l, an eligible contender of a semaphore, a free slot,
// written only while l's contender key still exists; older are the
// contender keys older than l's and slots the slot keys (Header set), as
// of one recent read. One transaction tries up to maxSlotTries of the
// free slots, in the order slotOrder gives (contenders that became
// eligible together start at different slots), and writes the first that
// is still free; if none is, it lists the slot keys, and l tries again.
// When every slot is taken (a holder whose contender key is gone still has
// its slot until its lease goes), it waits for a slot key's deletion and
// reads again. It returns the slot and its key's create revision, l's
// token.
func (s *Session) claimSlot(ctx context.Context, l *Lock, pfx string, older []*mvccpb.KeyValue, slots *etcdserverpb.RangeResponse) (int, fencing.Token, error) {
	keys := keyspace.Of(s.cfg.prefix, l.name)
	for {
		order := slotOrder(keys, l.semaphore().limit, older, slots.Kvs, maxSlotTries)
		if len(order) == 0 {
			// Every slot is taken: wait for one to go, then read again.
			if err := s.waitDelete(ctx, l, keys.Slots(), slots.Header.Revision); err != nil {
				return 0, 0, err
			}
			var err error
			if older, slots, err = s.readRank(ctx, l, pfx); err != nil {
				return 0, 0, err
			}
			continue
		}
		claims := make([]string, len(order))
		try := slotsOp(s.cfg.prefix, l.name) // when every slot tried is taken
		for i := len(order) - 1; i >= 0; i-- {
			claims[i] = keys.Slot(order[i])
			try = clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(claims[i]), "=", 0)},
				[]clientv3.Op{clientv3.OpPut(claims[i], l.value, clientv3.WithLease(s.lease))}, []clientv3.Op{try})
		}
		l.setClaiming(claims...)
		resp, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(l.key), "=", l.rev)).
			Then(try).
			Commit()
		if err != nil {
			return 0, 0, err
		}
		if !resp.Succeeded { // l's contender key is gone: nothing was written
			l.setClaiming()
			return 0, 0, ErrKeyDeleted
		}
		r := resp.Responses[0].GetResponseTxn()
		for i := range order {
			if r.Succeeded {
				return order[i], fencing.Token(resp.Header.Revision), nil
			}
			if i < len(order)-1 {
				r = r.Responses[0].GetResponseTxn()
			}
		}
		l.setClaiming()
		slots = r.Responses[0].GetResponseRange()
		slots.Header = resp.Header
	}
}

// slotOrder lists up to max of the free slots of a semaphore of limit
// slots, in the order that an eligible contender tries them, given older,
// the contender keys older than its own, and slots, the slot keys; none
// if every slot is taken. Every older contender without a slot is
// eligible too and about to claim one, so the contender starts after as
// many free slots as there are such contenders, in slot order, and goes
// on in slot order, wrapping around: contenders that read the same keys
// start at different slots.
func slotOrder(name keyspace.Name, limit int, older, slots []*mvccpb.KeyValue, max int) []int {
	taken := make(map[string]bool, len(slots))
	holders := make(map[string]bool, len(slots))
	for _, kv := range slots {
		taken[string(kv.Key)] = true
		holders[name.Contender(kv.Lease)] = true
	}
	var free []int // the first free slots, as many as the order can need
	skip := 0
	for _, kv := range older {
		if !holders[string(kv.Key)] {
			skip++
		}
	}
	for i := 0; i < limit && len(free) < skip+max; i++ {
		if !taken[name.Slot(i)] {
			free = append(free, i)
		}
	}
	if len(free) == 0 {
		return nil
	}
	if skip >= len(free) {
		// More contenders without a slot than free slots seen: the
		// listing is stale, or the slots are held by holders whose
		// contender keys are gone.
		skip %= len(free)
	}
	order := slices.Concat(free[skip:], free[:skip])
	return order[:min(len(order), max)]
}

// waitDelete waits for a deletion of a key under pfx after revision rev,
// or for its watch on the session's stream to break, after which the
// caller reads again anyway.
func (s *Session) waitDelete(ctx context.Context, l *Lock, pfx string, rev int64) error {
	return s.awaitWatch(ctx, l, func(fire func(error)) *watchmux.Watch {
		return s.mux.WatchRange(watchmux.Range{Key: pfx, End: clientv3.GetPrefixRangeEnd(pfx), Rev: rev + 1}, nil, fire, nil)
	})
}

// holdSlot records that l holds slot, whose key it created at revision
// tok, and watches that key: its deletion by anyone else loses the lock,
// as the contender key's does.
func (s *Session) holdSlot(l *Lock, slot int, tok fencing.Token) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.semaphore()
	h.n, h.key, h.claiming = slot, keyspace.Of(s.cfg.prefix, l.name).Slot(slot), nil
	h.token = tok
	if s.err != nil || l.state != stateAcquiring {
		return
	}
	h.watch = s.mux.WatchKey(h.key, int64(tok)+1, int64(tok), ownWatchDelay, l.keyGone)
}
