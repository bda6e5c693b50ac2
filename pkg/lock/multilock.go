package lock

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/pkg/internal/keyspace"
	"github.com/etcdlock/etcdlock/pkg/internal/watchmux"
)

// MaxNames is the most names one AcquireAll takes: its transaction puts
// one key and reads one predecessor per name, within etcd's default limit
// of 128 operations per transaction (--max-txn-ops).
const MaxNames = 64

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
// the first (Lock.name, Lock.key), with their keys and watches. Every key
// of the set has the same create revision, Lock.rev.
type setHold struct {
	more []member
}

// member is one more name of an AcquireAll.
type member struct {
	name, key string
	watch     *watchmux.Watch // guarded by Lock.mu, like Lock.watch
}

func (h *setHold) end(bool) []*watchmux.Watch {
	ws := make([]*watchmux.Watch, len(h.more))
	for i := range h.more {
		ws[i], h.more[i].watch = h.more[i].watch, nil
	}
	return ws
}

// otherKeys lists the keys of the names after the first, in order. They
// never change: it needs no lock.
func (h *setHold) otherKeys() []string {
	keys := make([]string, len(h.more))
	for i := range h.more {
		keys[i] = h.more[i].key // not a range copy: watch is Lock.mu's
	}
	return keys
}

func (h *setHold) deleteOps(l *Lock) []clientv3.Op {
	ops := make([]clientv3.Op, len(h.more))
	for i := range h.more {
		ops[i] = deleteIfCreated(h.more[i].key, l.rev)
	}
	return ops
}

// watch watches the keys of the names after the first from revision
// created, at which the set's write created them. l.mu must be held.
func (h *setHold) watch(s *Session, l *Lock, created int64) {
	for i := range h.more {
		h.more[i].watch = s.mux.WatchHeld(h.more[i].key, created+1, created, ownWatchDelay, l.keyGone)
	}
}

// AcquireAll blocks until the session holds every one of names, or
// returns an error holding none of them. It writes a key under every name
// in one transaction, so all of them have the same create revision — the
// token, one for the set — and the acquisition takes its place in every
// name's FIFO queue at the same point. A contender waits only for keys
// older than its own in each queue, and no two acquisitions' keys have the
// same revision, so the waits can never form a cycle: two AcquireAll calls
// with overlapping names, in any order, cannot deadlock each other or any
// Acquire. (Acquiring the names one Acquire at a time, in the order each
// caller lists them, can. So can a caller that waits for a set while it
// already holds another lock: order across calls is the caller's.)
//
// The Lock is held while every key exists: the deletion of any of them
// (Break of one name, an operator's delete) loses the whole set — a key
// deleted right after the acquiring write, before its watch exists, as for
// Acquire within about 200 ms of the deletion (see Lock), even if
// AcquireAll has returned meanwhile: the last read checks only the key of
// the name waited for last — and
// Release deletes all the keys in one transaction, each by compare on the
// token. Name and Key are the first name's; Names and Keys list all.
// Contenders of the names that use Acquire see an AcquireAll holder as
// an ordinary holder of each name; Record.Names lists its set.
//
// names must hold 1 to MaxNames distinct valid names whose keys and
// records fit in one request of 1 MiB — every key's record lists the whole
// set, so 64 names of up to about 200 bytes — else ErrInvalidName, before
// anything is sent. AcquireAll takes no option (WithLimit and WithShared
// apply to one name). The session must not hold or be acquiring any of the
// names (ErrAlreadyClaimed), as for Acquire. Failure handling, clean-up
// and leftovers are as for Acquire.
func (s *Session) AcquireAll(ctx context.Context, names []string, opts ...AcquireOption) (*Lock, error) {
	ac, err := newAcquireConfig(s.cfg.acquire, opts)
	if err != nil {
		return nil, err
	}
	if ac.shared || ac.semaphore() || ac.lockDelay > 0 {
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
		l.finish(StateReleased, ErrReleased)
		return nil, fmt.Errorf("%w: AcquireAll of %d names would send %d bytes in one request, more than %d: use fewer or shorter names", ErrInvalidName, len(names), size, maxSetBytes)
	}
	resp, err := s.enqueueSet(ctx, l)
	if err != nil {
		return nil, s.failAcquire(ctx, l, err)
	}
	s.watchKey(l, resp.Header.Revision)
	if err := s.waitSet(ctx, l, resp); err != nil {
		return nil, s.failAcquire(ctx, l, err)
	}
	return s.activated(ctx, l)
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

// enqueueSet writes the key of every name of l's set in one transaction,
// first replacing the keys that an earlier acquisition of any of them on
// this session left. Its reply's first responses hold each name's newest
// key before the write: the set's predecessor under that name.
func (s *Session) enqueueSet(ctx context.Context, l *Lock) (*clientv3.TxnResponse, error) {
	names, keys := l.Names(), l.Keys()
	cmps := make([]clientv3.Cmp, len(keys))
	then := make([]clientv3.Op, 0, 2*len(keys))
	elses := make([]clientv3.Op, len(keys))
	for i, key := range keys {
		cmps[i] = clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
		then = append(then, clientv3.OpGet(keyspace.Of(s.cfg.prefix, names[i]).Contenders(), clientv3.WithLastCreate()...))
		elses[i] = clientv3.OpGet(key)
	}
	for _, key := range keys {
		then = append(then, clientv3.OpPut(key, l.value, clientv3.WithLease(s.lease)))
	}
	for {
		resp, err := s.client.Txn(ctx).If(cmps...).Then(then...).Else(elses...).Commit()
		if err != nil || resp.Succeeded {
			return resp, err
		}
		for _, r := range resp.Responses {
			if kvs := r.GetResponseRange().Kvs; len(kvs) > 0 {
				if err := s.removeLeftover(ctx, kvs[0]); err != nil {
					return nil, err
				}
			}
		}
	}
}

// waitSet waits until l's set is first in every name's queue, given the
// reply of enqueueSet. One name after the other: once no key older than
// l's is left under a name, none can appear there, so the names already
// waited for stay clear while l waits for the next.
func (s *Session) waitSet(ctx context.Context, l *Lock, resp *clientv3.TxnResponse) error {
	names, keys := l.Names(), l.Keys()
	preds := make([]string, len(names))
	for i := range names {
		if kvs := resp.Responses[i].GetResponseRange().Kvs; len(kvs) > 0 {
			if err := behindSemaphore(l, kvs[0]); err != nil {
				return err
			}
			preds[i] = string(kvs[0].Key)
		}
	}
	for i, name := range names {
		if preds[i] == "" {
			continue
		}
		l.waits()
		if err := s.waitTurn(ctx, l, keys[i], keyspace.Of(s.cfg.prefix, name).Contenders(), preds[i]); err != nil {
			return err
		}
	}
	return nil
}
