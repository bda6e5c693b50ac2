package lock

import (
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/pkg/internal/watchmux"
)

// kind is what one kind of lock holds beyond a plain lock's one contender
// key, and how it ends: a reader (reader), a semaphore holder's slot
// (*slotHold), a lock-delay's marker (*delayHold), or the other names of
// an AcquireAll (*setHold). A Lock's kind is chosen once, when it is
// claimed (newKind); a plain lock has none, which costs its handle
// nothing more. The options allow at most one kind per acquisition.
//
// Its methods are called with Lock.mu held.
type kind interface {
	// end is called once, when the lock reaches a final state; clean
	// says it was released (Release, Close, a failed acquisition), not
	// lost or abandoned. It returns the watches of the lock's other
	// keys, for finish to remove.
	end(clean bool) []*watchmux.Watch
	// otherKeys lists the keys beyond the contender key that the lock
	// holds or may have written, which its loss must not leave holding
	// a slot or a name (Lock.lose) and whose write's reply may have been
	// lost (Session.removeUnconfirmed).
	otherKeys() []string
	// deleteOps returns the operations that delete l's other keys, each
	// only if it is still the one l wrote; deleteKeys runs them in one
	// transaction, before the contender key's delete.
	deleteOps(l *Lock) []clientv3.Op
}

// newKind returns the kind of an acquisition with options ac and, for an
// AcquireAll of several names, the names after its first.
func newKind(ac acquireConfig, more []member) kind {
	switch {
	case len(more) > 0:
		return &setHold{more: more}
	case ac.semaphore():
		return &slotHold{limit: ac.limit}
	case ac.shared:
		return reader{}
	case ac.lockDelay > 0:
		return &delayHold{d: ac.lockDelay}
	}
	return nil
}

// noKeys is the part of a kind that holds no key of its own.
type noKeys struct{}

func (noKeys) end(bool) []*watchmux.Watch    { return nil }
func (noKeys) otherKeys() []string           { return nil }
func (noKeys) deleteOps(*Lock) []clientv3.Op { return nil }

// reader is the kind of a reader of a read-write lock (WithShared): it
// holds what a plain lock holds, and waits only for older writers.
type reader struct{ noKeys }

// semaphore is l's slot if l is a semaphore's contender (WithLimit), else
// nil.
func (l *Lock) semaphore() *slotHold {
	h, _ := l.kind.(*slotHold)
	return h
}

// set is l's other names if l is an AcquireAll of several names, else
// nil.
func (l *Lock) set() *setHold {
	h, _ := l.kind.(*setHold)
	return h
}

// lockDelay is l's lock-delay if it has one (WithLockDelay), else nil.
func (l *Lock) lockDelay() *delayHold {
	h, _ := l.kind.(*delayHold)
	return h
}

// deleteIfCreated deletes key, in a transaction's Then, only if its
// create revision is rev: only the key that one write created.
func deleteIfCreated(key string, rev int64) clientv3.Op {
	return clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", rev)}, []clientv3.Op{clientv3.OpDelete(key)}, nil)
}

var (
	_ kind = reader{}
	_ kind = (*slotHold)(nil)
	_ kind = (*delayHold)(nil)
	_ kind = (*setHold)(nil)
)
