package lock

import (
	"context"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// plain is the kind of a plain lock, a mutex: one contender key; the
// oldest key under the name holds it, and a waiter waits for the key just
// older than its own, its predecessor.
type plain struct{ noKeys }

// queue writes l's key in the acquiring transaction (Lock.queue),
// which reads the newest older key first: the predecessor, which a waiter
// watches without another read.
func (plain) queue(ctx context.Context, l *Lock) (queued, []*mvccpb.KeyValue, error) {
	return l.queue(ctx, clientv3.OpGet(l.keys().Contenders(), clientv3.WithLastCreate()...))
}

// wait returns once no contender key of l's name is older than l's: at once if the
// acquiring transaction read no predecessor, else when waitTurn says so.
func (plain) wait(ctx context.Context, l *Lock, q queued) error {
	older := q.older.GetKvs()
	if len(older) == 0 {
		return nil // first in line
	}
	if err := behindSemaphore(l, older[0]); err != nil {
		return err
	}
	l.waits()
	return l.waitTurn(ctx, string(older[0].Key), func(ctx context.Context) (string, error) {
		return l.olderKey(ctx, l.key, l.keys().Contenders())
	})
}

// try writes l's key only if its name has no contender key (a create revision
// of 0 over a range holds only for an empty range), or returns a
// *LockedError naming the holder. A key of this session's earlier
// acquisition of the name is removed, and the name tried again if that
// key was its holder.
func (plain) try(ctx context.Context, l *Lock) (queued, error) {
	s, pfx := l.s, l.keys().Contenders()
	for {
		resp, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(pfx), "=", 0).WithPrefix()).
			Then(clientv3.OpPut(l.key, l.value, clientv3.WithLease(s.keeper.id))).
			Else(clientv3.OpGet(pfx, clientv3.WithFirstCreate()...), clientv3.OpGet(l.key)).
			Commit()
		if err != nil {
			return queued{}, err
		}
		if resp.Succeeded {
			return queued{rev: resp.Header.Revision}, nil
		}
		holder := resp.Responses[0].GetResponseRange().Kvs[0]
		mine := resp.Responses[1].GetResponseRange().Kvs
		if len(mine) == 0 {
			return queued{}, lockedError(l.name, holder)
		}
		// Left by an earlier acquisition: never adopted.
		if err := s.removeLeftover(ctx, mine[0]); err != nil {
			return queued{}, err
		}
		if string(holder.Key) != l.key {
			return queued{}, lockedError(l.name, holder)
		}
	}
}
