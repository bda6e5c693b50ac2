package lock

import (
	"context"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/lock/internal/keyspace"
)

// slotsOp reads name's slot keys. Not keys-only: etcd's keys-only range
// leaves out the lease, which tells this session's own slot keys.
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
// It records slot 0 as l's claim first, so that the clean-up of an
// acquisition whose reply is lost deletes both keys (removeUnconfirmed);
// the caller clears it (setSlot(-1)) when the transaction did not claim.
func (s *Session) firstHolder(l *Lock, pfx string) (empty []clientv3.Cmp, claim []clientv3.Op) {
	keys := keyspace.Of(s.cfg.prefix, l.name)
	l.setSlot(0)
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

// setSlot records slot as the one l is claiming, or none for -1, before
// the claim is sent: the clean-up of a claim whose reply is lost deletes
// that slot's key by the value l wrote (removeUnconfirmed, deleteKeys).
func (l *Lock) setSlot(slot int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if slot < 0 {
		l.slotKey = ""
		return
	}
	l.slot, l.slotKey = slot, keyspace.Of(l.s.cfg.prefix, l.name).Slot(slot)
}

// claimSlot gives l, an eligible contender of a semaphore, a free slot:
// the lowest-numbered slot key that does not exist, written only while l's
// contender key still exists. When every slot is taken (a holder whose
// contender key is gone still has its slot until its lease goes), it
// waits for a slot key's deletion. It returns the slot key's create
// revision, l's token.
//
// get lists the slot keys as of a recent read; its Header is set.
func (s *Session) claimSlot(ctx context.Context, l *Lock, get *etcdserverpb.RangeResponse) (fencing.Token, error) {
	keys := keyspace.Of(s.cfg.prefix, l.name)
	queueRev := int64(l.token)
	for first := true; ; first = false {
		if !first {
			resp, err := s.client.Do(ctx, slotsOp(s.cfg.prefix, l.name))
			if err != nil {
				return 0, err
			}
			get = (*etcdserverpb.RangeResponse)(resp.Get())
		}
		taken := make(map[string]bool, len(get.Kvs))
		for _, kv := range get.Kvs {
			taken[string(kv.Key)] = true
		}
		for slot := range l.opts.limit {
			key := keys.Slot(slot)
			if taken[key] {
				continue
			}
			l.setSlot(slot) // for failAcquire's clean-up if the reply is lost
			resp, err := s.client.Txn(ctx).
				If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
					clientv3.Compare(clientv3.CreateRevision(l.key), "=", queueRev)).
				Then(clientv3.OpPut(key, l.value, clientv3.WithLease(s.lease))).
				Else(clientv3.OpGet(l.key, clientv3.WithKeysOnly())).
				Commit()
			if err != nil {
				return 0, err
			}
			if resp.Succeeded {
				return fencing.Token(resp.Header.Revision), nil
			}
			if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 0 || kvs[0].CreateRevision != queueRev {
				return 0, ErrKeyDeleted
			}
		}
		l.setSlot(-1)
		// Every slot is taken: wait for one to go, then read again.
		if err := s.waitDelete(ctx, l, keys.Slots(), get.Header.Revision, clientv3.WithPrefix()); err != nil {
			return 0, err
		}
	}
}

// freeSlot is the lowest-numbered of a semaphore's limit slots not among
// slots, the slot keys of name; -1 if none is free.
func freeSlot(name keyspace.Name, limit int, slots []*mvccpb.KeyValue) int {
	taken := make(map[string]bool, len(slots))
	for _, kv := range slots {
		taken[string(kv.Key)] = true
	}
	for i := range limit {
		if !taken[name.Slot(i)] {
			return i
		}
	}
	return -1
}

// waitDelete waits for a deletion of key (with clientv3.WithPrefix in
// opts, of a key under it) after revision rev, or for etcd to cancel the
// watch, after which the caller reads again anyway.
func (s *Session) waitDelete(ctx context.Context, l *Lock, key string, rev int64, opts ...clientv3.OpOption) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch := s.client.Watch(clientv3.WithRequireLeader(wctx), key, append(opts, clientv3.WithRev(rev+1), clientv3.WithFilterPut())...)
	for {
		select {
		case wr, ok := <-wch:
			if !ok || wr.Canceled || wr.Err() != nil || len(wr.Events) > 0 {
				return nil
			}
		case <-l.ctx.Done():
			return context.Cause(l.ctx)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// holdSlot records that l holds its slot key, created at revision tok, and
// watches that key: its deletion by anyone else loses the lock, as the
// contender key's does.
func (s *Session) holdSlot(l *Lock, tok fencing.Token) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.queueRev, l.token = int64(l.token), tok
	if s.err != nil || l.state != stateAcquiring {
		return
	}
	l.slotWatch = s.mux.WatchKey(l.slotKey, int64(tok)+1, int64(tok), ownWatchDelay, l.keyGone)
}
