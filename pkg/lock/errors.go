package lock

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/internal/keyspace"
	"github.com/etcdlock/etcdlock/pkg/internal/request"
)

// Sentinel errors. Errors returned by this package wrap them; test with
// errors.Is.
var (
	// ErrLocked: TryAcquire found the name held by someone else. The error
	// is a *LockedError naming the holder.
	ErrLocked = errors.New("lock: held by another owner")
	// ErrAlreadyClaimed: the session already holds, or is acquiring, this
	// name. A session holds at most one claim per name.
	ErrAlreadyClaimed = errors.New("lock: session already holds or is acquiring this name")
	// ErrInvalidName: a lock name is empty or contains NUL.
	ErrInvalidName = errors.New("lock: invalid name")
	// ErrInvalidOption: an option is nil or its value out of range, two
	// options cannot be combined, or the client is nil.
	ErrInvalidOption = errors.New("lock: invalid option")

	// ErrSessionLost: the session can no longer prove that its lease is
	// alive. Returned (as a *LostError) by Session.Err and by calls on a
	// lost session.
	ErrSessionLost = errors.New("lock: session lost")
	// ErrSessionClosed: Session.Close was called.
	ErrSessionClosed = errors.New("lock: session closed")
	// ErrLost: a held lock was lost. Returned (as a *LostError) by Lock.Err.
	ErrLost = errors.New("lock: lost")
	// ErrReleased: the lock was released by Release or Session.Close.
	ErrReleased = errors.New("lock: released")
	// ErrUnavailable: etcd did not answer a request before the call's
	// ctx ended, or within DefaultTimeout for a ctx without a deadline.
	// The error also says why, as far as the client can tell (a refused
	// connection, an unknown host, a TLS handshake that failed, no
	// leader, no answer), and wraps ctx's error.
	ErrUnavailable = request.ErrUnavailable
	// ErrMarkersKept: Session.Close revoked the lease, but could not
	// delete the lock-delay markers of clean ends (WithLockDelay): the
	// next holders of those names wait the delay.
	ErrMarkersKept = errors.New("lock: lock-delay markers of clean ends not deleted")

	// Causes of loss, found with errors.Is on a *LostError.

	// ErrDeadlinePassed: the conservative lease deadline passed without a
	// successful renewal.
	ErrDeadlinePassed = errors.New("lock: lease deadline passed without renewal")
	// ErrLeaseRevoked: etcd answered that the lease is gone before it
	// could have expired it (before the last successful renewal's send
	// time + TTL): someone revoked it (Break, etcdctl lease revoke).
	ErrLeaseRevoked = errors.New("lock: lease revoked")
	// ErrLeaseExpired: etcd answered that the lease is gone at a time it
	// could have expired it: the answer came after the deadline but before
	// the deadline's timer ended the lock (rare: a process paused past its
	// deadline reports ErrDeadlinePassed), too late to tell an expiry from
	// a revoke.
	ErrLeaseExpired = errors.New("lock: lease expired")
	// ErrKeyDeleted: the lock's key was deleted by someone else while its
	// lease lived (etcdctl del; Break, unless its revoke is heard of
	// first), or etcd did not say within half a second whether it lives.
	ErrKeyDeleted = errors.New("lock: key deleted")
	// ErrBreakRequested: the lock's key was written by someone else, as
	// Break does to ask its holder to stop. The key stays until Release
	// (or Session.Close) deletes it.
	ErrBreakRequested = errors.New("lock: break requested (the key was written by someone else)")
	// ErrWatchRefused: etcd refused to watch the lock's key (a holder is
	// then lost: it could not learn of the key's deletion) or a waiter's
	// predecessor (its Acquire fails), because the session's etcd user
	// may not read it. The error also wraps etcd's reason, which matches
	// rpctypes.ErrPermissionDenied.
	ErrWatchRefused = errors.New("lock: etcd refused to watch the key")

	// ErrNotHeld: detached.Locks.Renew found no lock with that token: it expired,
	// was released, or never existed.
	ErrNotHeld = errors.New("lock: not held")
	// ErrNotOwner: the token belongs to a lock whose owner differs from the
	// owner given, or the token's key is not the current holder.
	ErrNotOwner = errors.New("lock: not the owner")
	// ErrLimitMismatch: a semaphore acquisition (WithLimit) found an older
	// key of the name written with another limit, or by a lock that is not
	// a semaphore; see WithLimit.
	ErrLimitMismatch = errors.New("lock: name is used with another limit")
)

// LockedError reports the current holder of a name. It wraps ErrLocked.
type LockedError struct {
	Name    string           // lock name
	Owner   string           // holder's owner identity ("" if Foreign)
	Token   fencing.Token    // holder's fencing token
	Key     string           // holder's key: of a semaphore's holder, its contender key (Inspect's Contender.Key), not its slot key
	Since   time.Time        // when the holder says it acquired the lock (its clock)
	LeaseID clientv3.LeaseID // holder's lease
	// Foreign is set when the holder's key has no etcdlock record: another
	// etcd lock client (etcdctl lock, concurrency.Mutex) wrote it.
	Foreign bool
}

func (e *LockedError) Error() string {
	if e.Foreign {
		return fmt.Sprintf("lock: %q held by %s (token %s, lease %x)", e.Name, keyspace.ForeignHolder, e.Token, int64(e.LeaseID))
	}
	return fmt.Sprintf("lock: %q held by %q (token %s)", e.Name, e.Owner, e.Token)
}

// Unwrap returns ErrLocked.
func (e *LockedError) Unwrap() error { return ErrLocked }

// lockedError describes kv, the holder of name.
func lockedError(name string, kv *mvccpb.KeyValue) *LockedError {
	r, ok := keyspace.Decode(kv.Value)
	return &LockedError{Name: name, Owner: r.Owner, Token: fencing.Token(kv.CreateRevision), Key: string(kv.Key), Since: r.Acquired,
		LeaseID: clientv3.LeaseID(kv.Lease), Foreign: !ok}
}

// LostError says why a session or lock stopped being valid. It wraps Kind
// (ErrSessionLost or ErrLost), Cause (ErrDeadlinePassed, ErrLeaseRevoked,
// ErrLeaseExpired, ErrKeyDeleted, ErrBreakRequested, ErrWatchRefused, or
// the session's LostError) and Detail (the last etcd error, if any).
type LostError struct {
	Kind   error
	Cause  error
	Detail error
	At     time.Time // when the loss was detected, on the session's clock
}

func (e *LostError) Error() string {
	s := e.Kind.Error() + ": " + strings.TrimPrefix(e.Cause.Error(), "lock: ")
	if e.Detail != nil {
		s += " (last error: " + e.Detail.Error() + ")"
	}
	return s
}

// Unwrap returns Kind, Cause and Detail for errors.Is and errors.As.
func (e *LostError) Unwrap() []error {
	if e.Detail == nil {
		return []error{e.Kind, e.Cause}
	}
	return []error{e.Kind, e.Cause, e.Detail}
}
