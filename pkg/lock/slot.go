package lock

import (
	"context"
	"slices"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/internal/keyspace"
	"github.com/etcdlock/etcdlock/pkg/internal/watchmux"
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
		if clientv3.LeaseID(kv.Lease) != s.keeper.id {
			kept = append(kept, kv)
			continue
		}
		if err := s.removeLeftover(ctx, kv); err != nil {
			return nil, err
		}
	}
	return kept, nil
}

// emptyName returns the comparisons that hold when l's name has no key at
// all: no contender key of l's name (no holder or waiter of any kind, no
// key this session left) and no slot key (a holder whose contender key is
// gone still has its slot). etcd compares every key of a range, and the
// range's absent key when it is empty, so a create revision of 0 over a
// range holds exactly when the range is empty. A contender that writes
// its key and slot 0's when they hold is first in FIFO order, and slot
// 0's new key is created after every earlier holder's of that slot.
func (l *Lock) emptyName() []clientv3.Cmp {
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(l.keys().Contenders()), "=", 0).WithPrefix(),
		clientv3.Compare(clientv3.CreateRevision(l.keys().Slots()), "=", 0).WithPrefix(),
	}
}

// claimOps returns the writes with which l, a semaphore's contender of
// kind h, claims slot together with its contender key: both keys, under
// the session's lease, with l's value, at one revision, l's token. It
// records the slot's key as l's claim first (setUnconfirmed); the caller
// clears it when the transaction did not claim.
func (h *slotHold) claimOps(l *Lock, slot int) []clientv3.Op {
	s := l.s
	key := l.keys().Slot(slot)
	h.setUnconfirmed(l, key)
	return []clientv3.Op{
		clientv3.OpPut(l.key, l.value, clientv3.WithLease(s.keeper.id)),
		clientv3.OpPut(key, l.value, clientv3.WithLease(s.keeper.id)),
	}
}

// probeSemaphore sends a semaphore's first transaction when the session
// does not expect its name to have keys (see slotHold.queue), and
// TryAcquire's: when the name has no key at all (emptyName), it claims
// slot 0 and returns claimed and the write's revision; otherwise it
// writes nothing and returns the name's contender keys, oldest first, and
// its slot keys, read at revision rev.
func (h *slotHold) probeSemaphore(ctx context.Context, l *Lock) (rev int64, claimed bool, queue, slots []*mvccpb.KeyValue, err error) {
	s := l.s
	claim, read := h.claimOps(l, 0), []clientv3.Op{
		clientv3.OpGet(l.keys().Contenders(), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)),
		slotsOp(s.cfg.prefix, l.name),
	}
	// A repeat finds l's key, as the acquiring write's does (Lock.queue).
	resp, err := retried(ctx, s.client, h.mayLand(l, l.keys().Slot(0)), func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return s.client.Txn(ctx).If(l.emptyName()...).Then(claim...).Else(read...).Commit()
	})
	if err != nil {
		return 0, false, nil, nil, err
	}
	if resp.Succeeded {
		return resp.Header.Revision, true, nil, nil, nil
	}
	h.setUnconfirmed(l)
	return resp.Header.Revision, false, resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs, nil
}

// stillFree returns the comparisons that hold when no contender key under
// l's name was written after revision read, so that the contenders are those
// read then or fewer, and slot is free.
func (l *Lock) stillFree(read int64, slot int) []clientv3.Cmp {
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.ModRevision(l.keys().Contenders()), "<", read+1).WithPrefix(),
		clientv3.Compare(clientv3.CreateRevision(l.keys().Slot(slot)), "=", 0),
	}
}

// claimOrQueue sends one transaction: If(cmps) Then(claim slot with l's
// contender key, claimOps) Else(queue l as Lock.queue does, reading
// every older key, and read the slot keys); with slot -1, only the Else.
// It returns what the transaction did, or the leftover key of this
// session that stopped it from queueing.
func (h *slotHold) claimOrQueue(ctx context.Context, l *Lock, slot int, cmps []clientv3.Cmp) (queued, []*mvccpb.KeyValue, error) {
	s := l.s
	absent, then, mine := l.queueOps(clientv3.OpGet(l.keys().Contenders(), clientv3.WithPrefix()))
	enqueue := clientv3.OpTxn(absent, append(then, slotsOp(s.cfg.prefix, l.name)), mine)
	var claim []clientv3.Op
	lost := l.mayLand
	if slot >= 0 {
		claim, lost = h.claimOps(l, slot), h.mayLand(l, l.keys().Slot(slot))
	}
	// A repeat finds l's key: the claim's compares fail (a contender key
	// was written), and the queueing transaction returns it as a
	// leftover, as the acquiring write's does (Lock.queue).
	resp, err := retried(ctx, s.client, lost, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		txn := s.client.Txn(ctx)
		if slot < 0 {
			return txn.Then(enqueue).Commit()
		}
		return txn.If(cmps...).Then(claim...).Else(enqueue).Commit()
	})
	if err != nil {
		return queued{}, nil, err
	}
	if slot >= 0 && resp.Succeeded {
		return queued{rev: resp.Header.Revision, claimed: true, slot: slot}, nil, nil
	}
	h.setUnconfirmed(l)
	r := resp.Responses[0].GetResponseTxn()
	q, leftovers := queuedBy(resp.Header.Revision, r)
	if leftovers == nil {
		q.slots = r.Responses[2].GetResponseRange()
		q.slots.Header = resp.Header
	}
	return q, leftovers, nil
}

// takeSlot writes l's contender key and the key of slot in one
// transaction, if stillFree holds since revision read, and returns the
// write's revision; ok is false if the transaction did not apply.
func (h *slotHold) takeSlot(ctx context.Context, l *Lock, read int64, slot int) (rev int64, ok bool, err error) {
	s := l.s
	claim := h.claimOps(l, slot)
	// A repeat finds l's contender key written since read, and writes
	// nothing: TryAcquire reads again and removes it (removeOwnKeys).
	txn, err := retried(ctx, s.client, h.mayLand(l, l.keys().Slot(slot)), func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return s.client.Txn(ctx).If(l.stillFree(read, slot)...).Then(claim...).Commit()
	})
	if err != nil {
		return 0, false, err
	}
	if txn.Succeeded {
		return txn.Header.Revision, true, nil
	}
	h.setUnconfirmed(l)
	return 0, false, nil
}

// setUnconfirmed records keys, before a claim that may write one of them is
// sent, as the slot keys l may have written until the reply comes (none:
// the reply came and l claimed none). The clean-up of an acquisition whose
// claim's reply is lost deletes them by the value l wrote
// (removeUnconfirmed, deleteKeys), which no other write has.
func (h *slotHold) setUnconfirmed(l *Lock, keys ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h.unconfirmed = keys
}

// mayLand returns the function retried calls for a try of l's write,
// which may write keys, sent beside one a member holds unanswered: that
// one may land late, after l's keys were deleted (Lock.landLate), or after
// an answer said it wrote none of keys (setUnconfirmed), so they stay
// among l's other keys.
func (h *slotHold) mayLand(l *Lock, keys ...string) func() {
	return func() {
		l.mayLand()
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, k := range keys {
			if !slices.Contains(h.landable, k) {
				h.landable = append(h.landable, k)
			}
		}
	}
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
func (h *slotHold) claimSlot(ctx context.Context, l *Lock, older []*mvccpb.KeyValue, slots *etcdserverpb.RangeResponse) (int, fencing.Token, error) {
	s := l.s
	keys := l.keys()
	for {
		order := slotOrder(keys, h.limit, older, slots.Kvs, maxSlotTries)
		if len(order) == 0 {
			// Every slot is taken: wait for one to go, then read again.
			if err := l.waitDelete(ctx, keys.Slots(), slots.Header.Revision); err != nil {
				return 0, 0, err
			}
			var err error
			if older, slots, err = l.readRank(ctx); err != nil {
				return 0, 0, err
			}
			continue
		}
		claims := make([]string, len(order))
		try := slotsOp(s.cfg.prefix, l.name) // when every slot tried is taken
		for i := len(order) - 1; i >= 0; i-- {
			claims[i] = keys.Slot(order[i])
			try = clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(claims[i]), "=", 0)},
				[]clientv3.Op{clientv3.OpPut(claims[i], l.value, clientv3.WithLease(s.keeper.id))}, []clientv3.Op{try})
		}
		// Before them, whether a slot tried holds l's own write: a try
		// of this claim that landed before the one answered, whose
		// slot the answered one would find taken and pass over for the
		// next (l's value is unique to this acquisition).
		for i := len(order) - 1; i >= 0; i-- {
			try = clientv3.OpTxn(s.sameWrite(claims[i], l.value), []clientv3.Op{clientv3.OpGet(claims[i])}, []clientv3.Op{try})
		}
		h.setUnconfirmed(l, claims...)
		resp, err := retried(ctx, s.client, h.mayLand(l, claims...), func(ctx context.Context) (*clientv3.TxnResponse, error) {
			return s.client.Txn(ctx).
				If(clientv3.Compare(clientv3.CreateRevision(l.key), "=", l.rev)).
				Then(try).
				Commit()
		})
		if err != nil {
			return 0, 0, err
		}
		if !resp.Succeeded { // l's contender key is gone: nothing was written
			h.setUnconfirmed(l)
			return 0, 0, ErrKeyDeleted
		}
		r := resp.Responses[0].GetResponseTxn()
		for i := range order {
			if r.Succeeded { // l's own write
				return order[i], fencing.Token(r.Responses[0].GetResponseRange().Kvs[0].CreateRevision), nil
			}
			r = r.Responses[0].GetResponseTxn()
		}
		for i := range order {
			if r.Succeeded {
				return order[i], fencing.Token(resp.Header.Revision), nil
			}
			if i < len(order)-1 {
				r = r.Responses[0].GetResponseTxn()
			}
		}
		h.setUnconfirmed(l)
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
func (l *Lock) waitDelete(ctx context.Context, pfx string, rev int64) error {
	s := l.s
	return l.awaitWatch(ctx, func(fire func(error)) *watchmux.Watch {
		return s.mux.WatchRange(watchmux.Range{Key: pfx, End: clientv3.GetPrefixRangeEnd(pfx), Rev: rev + 1}, nil, fire, nil)
	})
}

// holdSlot records that l, of kind h, holds slot, whose key it created
// at revision tok, and watches that key: its deletion by anyone else
// loses the lock, as the contender key's does.
func (h *slotHold) holdSlot(l *Lock, slot int, tok fencing.Token) {
	s := l.s
	s.mu.Lock()
	defer s.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	h.n, h.key, h.unconfirmed = slot, l.keys().Slot(slot), nil
	h.token = tok
	if s.err != nil || l.state != stateAcquiring {
		return
	}
	h.keyWatch = s.mux.WatchHeld(h.key, int64(tok)+1, int64(tok), ownWatchDelay, l.keyGone)
}
