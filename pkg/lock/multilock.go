package lock

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/pkg/internal/keyspace"
	"github.com/etcdlock/etcdlock/pkg/internal/watchmux"
)

// maxSetBytes bounds the request one AcquireAll sends, below etcd's
// default request size limit (1.5 MiB, --max-request-bytes).
const maxSetBytes = 1 << 20

// setRequestBytes bounds the size of AcquireAll's transaction for names
// from above: per name, its key three times (the compare, the put, the
// get of the failure branch), its prefix twice (the predecessor's get: key
// and range end), the record, which lists the whole set (so the request
// grows with the square of the names' length), and each operation's
// framing.
func setRequestBytes(prefix string, names []string, l *Lock) int {
	const framing = 32 // per operation: tags, lengths, options
	size := 0
	for i, key := range l.Keys() {
		size += 3*len(key) + 2*len(keyspace.Of(prefix, names[i]).Contenders()) + len(l.value) + 4*framing
	}
	return size
}

// setHold is the kind of an AcquireAll of several names: its names after
// the first (Lock.name, Lock.key), their contender keys, and the
// watches of those keys (guarded by Lock.mu). Every key of the set has
// the same create revision, Lock.rev.
type setHold struct {
	noKeys
	names, keys []string
	watches     []*watchmux.Watch
}

// queue writes the key of every name of l's set in one transaction, If
// none of them exists; Then, before the puts, it reads each name's newest
// key: the set's predecessor under that name. Else it reads them: keys
// of this session, leftovers, which it returns.
func (h *setHold) queue(ctx context.Context, l *Lock) (queued, []*mvccpb.KeyValue, error) {
	s := l.s
	names, keys := l.names(), l.Keys()
	cmps := make([]clientv3.Cmp, len(keys))
	then := make([]clientv3.Op, 0, 2*len(keys))
	elses := make([]clientv3.Op, len(keys))
	for i, key := range keys {
		cmps[i] = clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
		then = append(then, clientv3.OpGet(keyspace.Of(s.cfg.prefix, names[i]).Contenders(), clientv3.WithLastCreate()...))
		elses[i] = clientv3.OpGet(key)
	}
	for _, key := range keys {
		then = append(then, clientv3.OpPut(key, l.value, clientv3.WithLease(s.keeper.id)))
	}
	resp, err := retried(ctx, s.client, l.mayLand, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return s.client.Txn(ctx).If(cmps...).Then(then...).Else(elses...).Commit()
	})
	if err != nil {
		return queued{}, nil, err
	}
	preds := make([]*mvccpb.KeyValue, len(keys))
	var leftovers []*mvccpb.KeyValue
	for i := range keys {
		if kvs := resp.Responses[i].GetResponseRange().Kvs; len(kvs) > 0 {
			preds[i] = kvs[0]
		}
	}
	if !resp.Succeeded {
		for _, kv := range preds {
			if kv != nil {
				leftovers = append(leftovers, kv)
			}
		}
		return queued{}, leftovers, nil
	}
	return queued{rev: resp.Header.Revision, preds: preds}, nil, nil
}

// wait waits until l's set is first in every name's queue, one name after
// the other: once no key older than l's is left under a name, none can
// appear there, so the names already waited for stay clear while l waits
// for the next.
func (h *setHold) wait(ctx context.Context, l *Lock, q queued) error {
	for _, pred := range q.preds {
		if pred != nil {
			if err := behindSemaphore(l, pred); err != nil {
				return err
			}
		}
	}
	names, keys := l.names(), l.Keys()
	for i, pred := range q.preds {
		if pred == nil {
			continue
		}
		l.waits()
		own, pfx := keys[i], keyspace.Of(l.s.cfg.prefix, names[i]).Contenders()
		if err := l.waitTurn(ctx, string(pred.Key), func(ctx context.Context) (string, error) {
			return l.olderKey(ctx, own, pfx)
		}); err != nil {
			return err
		}
	}
	return nil
}

// try is never called: TryAcquire takes one name, which is never a set.
func (*setHold) try(context.Context, *Lock) (queued, error) {
	return queued{}, errors.New("lock: TryAcquire of several names")
}

// watch watches the keys of the names after the first from revision
// created, at which the set's write created them.
func (h *setHold) watch(l *Lock, created int64) {
	h.watches = make([]*watchmux.Watch, len(h.keys))
	for i, key := range h.keys {
		h.watches[i] = l.s.mux.WatchHeld(key, created+1, created, ownWatchDelay, l.keyGone)
	}
}

func (h *setHold) others() (names, keys []string) { return h.names, h.keys }

func (h *setHold) end(bool) []*watchmux.Watch {
	ws := h.watches
	h.watches = nil
	return ws
}

// otherKeys lists the keys of the names after the first, in order.
func (h *setHold) otherKeys() []string { return h.keys }

func (h *setHold) deleteOps(l *Lock) []clientv3.Op {
	ops := make([]clientv3.Op, len(h.keys))
	for i, key := range h.keys {
		ops[i] = deleteIfCreated(key, l.rev)
	}
	return ops
}

// AcquireAll blocks until the session holds every one of names, with one
// token for the set, or returns an error holding none of them; calls with
// overlapping names cannot deadlock one another. Losing any key loses the
// set. names are 1 to MaxNames distinct valid names (else ErrInvalidName);
// WithLimit, WithShared and WithLockDelay are refused. Otherwise as Acquire.
func (s *Session) AcquireAll(ctx context.Context, names []string, opts ...AcquireOption) (*Lock, error) {
	ac, err := newAcquireConfig(s.cfg.acquire, opts)
	if err != nil {
		return nil, err
	}
	if ac.shared || ac.limit > 1 || ac.lockDelay > 0 {
		return nil, invalid("AcquireAll takes neither WithLimit, WithShared nor WithLockDelay")
	}
	if err := validateSet(names); err != nil {
		return nil, err
	}
	l, err := s.claim(ctx, append([]string(nil), names...), ac)
	if err != nil {
		return nil, err
	}
	ctx, stop := l.bind(ctx)
	defer stop()
	if size := setRequestBytes(s.cfg.prefix, names, l); size > maxSetBytes {
		s.unclaim(l)
		l.finish(stateReleased, ErrReleased)
		return nil, fmt.Errorf("%w: AcquireAll of %d names would send %d bytes in one request, more than %d: use fewer or shorter names", ErrInvalidName, len(names), size, maxSetBytes)
	}
	return l.acquire(ctx, false)
}

// validateSet checks the size of an AcquireAll's set and that no name
// comes twice; claim checks each name.
func validateSet(names []string) error {
	if len(names) == 0 || len(names) > MaxNames {
		return fmt.Errorf("%w: AcquireAll of %d names, want 1 to %d", ErrInvalidName, len(names), MaxNames)
	}
	seen := make(map[string]bool, len(names))
	for _, name := range names {
		if seen[name] {
			return fmt.Errorf("%w: %q given twice", ErrInvalidName, name)
		}
		seen[name] = true
	}
	return nil
}
