package lock

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/internal/keyspace"
	"github.com/etcdlock/etcdlock/pkg/internal/watchmux"
)

// kind is what one kind of lock does that another does not: how it
// queues, waits, tries and cleans up. The kinds are a plain lock (plain),
// a reader (reader), a semaphore's holder (*slotHold), a plain lock with
// a lock-delay (*delayHold) and an AcquireAll of several names
// (*setHold). A Lock's kind is chosen once, when it is claimed (newKind);
// the acquisition's skeleton (Lock.acquire), Release, Close and the
// clean-up call it, and nothing outside the kinds' files asks which kind
// a Lock is. See "A type per kind" in DESIGN.md.
type kind interface {
	// queue sends the acquiring transaction once, on the acquiring
	// goroutine: it writes l's keys and reads what l needs of the keys
	// older than its own among its name's contenders. If this session
	// left keys under l's names, it writes nothing and returns them
	// (leftovers, q.rev 0), for the caller to replace.
	queue(ctx context.Context, l *Lock) (q queued, leftovers []*mvccpb.KeyValue, err error)
	// try is TryAcquire's write: l's keys only if l can hold at once,
	// else a *LockedError or ErrLimitMismatch, with no key of l left.
	// Its result is a queue's with no older key: wait does not wait.
	try(ctx context.Context, l *Lock) (queued, error)
	// wait returns once l, queued (q), holds: no key it must wait for is
	// older, and what it holds beyond its key (a semaphore's slot, a
	// lock-delay's marker) is its own.
	wait(ctx context.Context, l *Lock, q queued) error
	// watch watches the keys written with l's contender key, from
	// revision created on. l.mu is held.
	watch(l *Lock, created int64)

	// holder is the key that stands for l as a holder and its token
	// (Lock.Key, Lock.Token): the contender key and its create revision,
	// or a semaphore holder's slot key and its.
	holder(l *Lock) (key string, token fencing.Token)
	// others lists the names after l's first and their contender keys
	// (an AcquireAll's; none for one name). They never change.
	others() (names, keys []string)

	// end is called once, when the lock reaches a final state; clean
	// says it was released (Release, Close, a failed acquisition), not
	// lost or abandoned. It returns the watches of the lock's other
	// keys, for finish to remove. l.mu is held.
	end(clean bool) []*watchmux.Watch
	// otherKeys lists the keys beyond the contender key that the lock
	// holds or may have written: a loss's leftovers (Lock.lose), a lost
	// reply's clean-up (Lock.removeUnconfirmed). l.mu is held.
	otherKeys() []string
	// deleteOps returns the operations that delete l's other keys, each
	// only if it is still the one l wrote, for Lock.deleteKeys's
	// transaction, before the contender key's delete. l.mu is held.
	deleteOps(l *Lock) []clientv3.Op
	// closeOps returns what Session.Close deletes for l before it
	// revokes the lease, which takes l's keys: a clean end's lock-delay
	// marker. l.mu is held.
	closeOps(l *Lock) []clientv3.Op
}

// newKind returns the kind of an acquisition with options ac and, for an
// AcquireAll, the names after its first and their contender keys.
func newKind(ac acquireConfig, names, keys []string) kind {
	switch {
	case len(names) > 0:
		return &setHold{names: names, keys: keys}
	case ac.limit > 1:
		return &slotHold{limit: ac.limit}
	case ac.shared:
		return reader{}
	case ac.lockDelay > 0:
		return &delayHold{d: ac.lockDelay}
	}
	return plain{}
}

// oneKind rejects options that choose two kinds (see newKind).
func (ac acquireConfig) oneKind() error {
	if ac.shared && ac.limit > 1 {
		return invalid("WithLimit and WithShared cannot be combined")
	}
	if ac.lockDelay > 0 && (ac.shared || ac.limit > 1) {
		return invalid("WithLockDelay applies to plain locks, not with WithLimit or WithShared")
	}
	return nil
}

// noKeys is the part of a kind that holds no key beyond its contender
// keys and watches none of its own.
type noKeys struct{}

func (noKeys) watch(*Lock, int64) {}

func (noKeys) holder(l *Lock) (string, fencing.Token) { return l.key, fencing.Token(l.rev) }

func (noKeys) others() (names, keys []string) { return nil, nil }

func (noKeys) end(bool) []*watchmux.Watch    { return nil }
func (noKeys) otherKeys() []string           { return nil }
func (noKeys) deleteOps(*Lock) []clientv3.Op { return nil }
func (noKeys) closeOps(*Lock) []clientv3.Op  { return nil }

// behindSemaphore fails with ErrLimitMismatch if pred, the newest key
// older than a plain lock's, a reader's or a set's, is a semaphore's: a
// name's queue holds one kind (with the semaphore's checkLimits). Queued
// behind semaphore holders, a contender would get its token before
// theirs (a slot's token is written when the slot is claimed, after the
// holder queued), and a fenced resource would refuse it.
func behindSemaphore(l *Lock, pred *mvccpb.KeyValue) error {
	if r, _ := keyspace.Decode(pred.Value); r.Limit > 1 {
		return fmt.Errorf("%w: %q is held or awaited as a semaphore of limit %d (key %s)", ErrLimitMismatch, l.name, r.Limit, pred.Key)
	}
	return nil
}

// deleteIfCreated deletes key, in a transaction's Then, only if its
// create revision is rev: only the key that one write created.
func deleteIfCreated(key string, rev int64) clientv3.Op {
	return clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", rev)}, []clientv3.Op{clientv3.OpDelete(key)}, nil)
}

var (
	_ kind = plain{}
	_ kind = reader{}
	_ kind = (*slotHold)(nil)
	_ kind = (*delayHold)(nil)
	_ kind = (*setHold)(nil)
)
