package lock

import (
	"context"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/pkg/internal/keyspace"
)

// WithShared makes an acquisition a reader of a read-write lock: readers
// hold the name together, a writer alone, in FIFO order. A reader's token
// orders it but excludes no reader: readers should not write to a fenced
// resource. An AcquireOption, for Acquire and TryAcquire.
func WithShared() forAcquire {
	return func(c *config) error {
		c.acquire.shared = true
		return nil
	}
}

// reader is the kind of a reader of a read-write lock (WithShared): a
// plain lock's one contender key, but it waits only for older writers.
type reader struct{ noKeys }

// queue writes l's key in the acquiring transaction (Lock.queue),
// which reads the newest readerPageSize older keys first, to find the
// newest writer among them.
func (reader) queue(ctx context.Context, l *Lock) (queued, []*mvccpb.KeyValue, error) {
	return l.queue(ctx, clientv3.OpGet(l.keys().Contenders(), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(readerPageSize)))
}

// wait returns once no contender key of l's name that excludes readers
// is older than l's.
func (reader) wait(ctx context.Context, l *Lock, q queued) error {
	older := q.older.GetKvs()
	if len(older) > 0 {
		if err := behindSemaphore(l, older[0]); err != nil {
			return err
		}
	}
	wait, pred := readerTurn(older, q.older.GetMore())
	if !wait {
		return nil
	}
	l.waits()
	return l.waitTurn(ctx, pred, func(ctx context.Context) (string, error) {
		return l.olderWriter(ctx)
	})
}

// readerTurn reads older, the keys older than a reader's, newest first,
// as its acquiring transaction read them; more says there are others
// beyond. It returns whether the reader must wait and, if older holds
// it, the newest key it waits for ("" if waitTurn must read it).
func readerTurn(older []*mvccpb.KeyValue, more bool) (wait bool, pred string) {
	for _, kv := range older {
		if excludesReader(kv.Value) {
			return true, string(kv.Key)
		}
	}
	return more, ""
}

// try is TryAcquire for a reader (tryShared).
func (reader) try(ctx context.Context, l *Lock) (queued, error) {
	rev, err := l.tryShared(ctx)
	return queued{rev: rev}, err
}

// excludes reports whether a reader must wait for kv, an older key under
// its name: a writer's key, or a key without an etcdlock record.
func excludesReader(value []byte) bool {
	r, ok := keyspace.Decode(value)
	return !ok || !r.Shared
}

// readerPageSize is how many older keys a waiting reader reads at a time
// while it looks for the newest older writer among them.
const readerPageSize = 64

// olderWriter is a reader's read of its turn: it checks that l's key still
// exists and returns the newest older key that excludes readers, "" if
// there is none. Readers ahead of it are read in pages, newest first, at
// most readerPageSize a round trip; keys older than l's can only go away,
// so the pages need not be read at one revision.
func (l *Lock) olderWriter(ctx context.Context) (string, error) {
	s := l.s
	below, pfx := l.rev-1, l.keys().Contenders()
	for first := true; ; first = false {
		page := clientv3.OpGet(pfx, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend),
			clientv3.WithMaxCreateRev(below), clientv3.WithLimit(readerPageSize))
		var kvs []*mvccpb.KeyValue
		if first {
			resp, err := l.waitRead(ctx, clientv3.OpGet(l.key), page)
			if err != nil {
				return "", err
			}
			if mine := resp.Responses[0].GetResponseRange().Kvs; len(mine) == 0 || mine[0].CreateRevision != l.rev {
				return "", ErrKeyDeleted
			}
			kvs = resp.Responses[1].GetResponseRange().Kvs
		} else {
			resp, err := s.client.Do(ctx, page)
			if err != nil {
				return "", err
			}
			kvs = resp.Get().Kvs
		}
		for _, kv := range kvs {
			if excludesReader(kv.Value) {
				return string(kv.Key), behindSemaphore(l, kv)
			}
		}
		if len(kvs) < readerPageSize {
			return "", nil
		}
		below = kvs[len(kvs)-1].CreateRevision - 1
	}
}

// tryShared is TryAcquire for a reader: it reads the queue, fails with a
// *LockedError naming the holder (the oldest key) if a writer holds or
// waits, and otherwise
// writes l's key if no key under the name was written since the read
// (a key deleted since does not matter: it can only have been a reader).
// It returns the write's revision.
func (l *Lock) tryShared(ctx context.Context) (int64, error) {
	s := l.s
	pfx := l.keys().Contenders()
	for {
		get, err := s.client.Get(ctx, pfx, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
		if err != nil {
			return 0, err
		}
		replaced := false
		for _, kv := range get.Kvs {
			if string(kv.Key) == l.key {
				// Left by an earlier acquisition: never adopted.
				if err := s.removeLeftover(ctx, kv); err != nil {
					return 0, err
				}
				replaced = true
				break
			}
			if err := behindSemaphore(l, kv); err != nil {
				return 0, err
			}
			if excludesReader(kv.Value) {
				return 0, lockedError(l.name, get.Kvs[0])
			}
		}
		if replaced {
			continue
		}
		resp, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(pfx), "<", get.Header.Revision+1).WithPrefix()).
			Then(clientv3.OpPut(l.key, l.value, clientv3.WithLease(s.keeper.id))).
			Commit()
		if err != nil {
			return 0, err
		}
		if resp.Succeeded {
			return resp.Header.Revision, nil
		}
	}
}
