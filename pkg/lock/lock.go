package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/internal/request"
	"github.com/etcdlock/etcdlock/pkg/internal/watchmux"
)

// lockState is a lock's state as its holder sees it.
type lockState int

// Lock states. Only stateActive permits work; stateLost and stateReleased
// are final.
const (
	stateAcquiring lockState = iota // internal: the handle is not yet returned
	// stateActive: the lock is held and the session's deadline has not
	// passed.
	stateActive
	// stateLost: ownership can no longer be proven (deadline passed,
	// renewal refused, key deleted, its watch refused, session lost).
	// Another owner may exist.
	stateLost
	// stateReleased: Release or Session.Close gave the lock up.
	stateReleased
)

func (s lockState) String() string {
	switch s {
	case stateAcquiring:
		return "acquiring"
	case stateActive:
		return "active"
	case stateLost:
		return "lost"
	case stateReleased:
		return "released"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Lock is a held lock; it is safe for concurrent use. Its Context is
// canceled and Err reports the loss no later than the session's deadline,
// or once its watch sees its key deleted by someone else. A paused process
// may resume after its lock was lost: pass Token with every write to a
// fenced resource, which rejects a stale holder's writes.
type Lock struct {
	s *Session
	lockName
	// rev is key's create revision — every key's, for AcquireAll — once
	// the acquiring write's reply came; 0 until then. It is the token of
	// every kind but a semaphore, whose holder's is its slot key's
	// (slotHold.token).
	rev   int64
	value string // the record this acquisition writes into key
	// kind is what l's kind of lock does that another does not (see
	// kind). Chosen by claim, never changed.
	kind kind
	// waitHook is WithWaitHook's fn until l.waits calls it; only the
	// acquiring goroutine uses it.
	waitHook func()
	// unanswered is set once a try of the acquiring write went
	// unanswered (mayLand): it may land after the keys' deletion.
	unanswered atomic.Bool

	ctx    context.Context
	cancel context.CancelCauseFunc

	// claimDropped is closed when the session drops the claim; made only when
	// a later acquisition of the name waits for that. Guarded by
	// Session.mu.
	claimDropped chan struct{}

	// mu guards what follows. Lock order: Session.mu, then Lock.mu, then
	// the session Mux's mutex.
	mu        sync.Mutex
	acquiring context.CancelCauseFunc // cancels the acquisition's context (bind), while it runs
	state     lockState
	since     time.Time // when the acquisition started; once active, when it became so
	err       error
	watch     *watchmux.Watch // on the key, from its first write until a final state
}

// names returns every name the lock holds: the one given to Acquire, or
// those given to AcquireAll, in that order.
func (l *Lock) names() []string {
	others, _ := l.kind.others()
	return append([]string{l.name}, others...)
}

// Keys returns the contender key of every name the lock holds, in the
// order given to Acquire or AcquireAll: their create revision is the
// token, but for a semaphore's holder (see WithLimit).
func (l *Lock) Keys() []string {
	_, others := l.kind.others()
	return append([]string{l.key}, others...)
}

// Name returns the lock name; for AcquireAll, the first of its names.
func (l *Lock) Name() string { return l.name }

// Key returns the etcd key that represents this claim: its contender key,
// or for a semaphore holder its slot key (see WithLimit).
func (l *Lock) Key() string {
	key, _ := l.kind.holder(l)
	return key
}

// Token returns the fencing token: the create revision of Key.
func (l *Lock) Token() fencing.Token {
	_, tok := l.kind.holder(l)
	return tok
}

// Context returns a context canceled when the lock is lost or released;
// by then Err says why, and so does context.Cause.
func (l *Lock) Context() context.Context { return l.ctx }

// currentState returns the lock's current state.
func (l *Lock) currentState() lockState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state
}

// Err returns nil while the lock is active, ErrReleased after release, and
// a *LostError wrapping ErrLost and the cause after a loss.
func (l *Lock) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Release gives the lock up: Err returns ErrReleased at once (unless the
// lock was lost), then its keys are deleted by a compare on their token, so
// it never deletes another owner's key; a key already gone is success. An
// error means the delete may not have happened: the lease, Close or the
// session's next acquisition of the name takes the key. Once the session
// is lost to its deadline it returns its *LostError at once; after Abandon
// it deletes nothing.
func (l *Lock) Release(ctx context.Context) error {
	l.finish(stateReleased, ErrReleased)
	defer l.s.unclaim(l) // after the delete: see Session.claim
	if l.s.ledger.abandoned.Load() {
		return nil // the keys stay until the lease expires, as Abandon promises
	}
	if err := l.s.lostErr(); err != nil {
		return fmt.Errorf("lock: release %q: its lease, renewed no more, takes its keys: %w", l.name, err)
	}
	// The session's loss ends the delete: the lease takes the keys then.
	ctx, stop := l.s.untilLost(ctx)
	defer stop()
	if err := l.deleteKeys(ctx, true); err != nil {
		if lerr := l.s.lostErr(); lerr != nil {
			return fmt.Errorf("lock: release %q: its lease, renewed no more, takes its keys: %w", l.name, lerr)
		}
		l.s.keepForClose(l)
		return fmt.Errorf("lock: release %q: %w", l.name, asCtxErr(ctx, err))
	}
	l.landLate()
	l.s.released(l)
	if ce := l.s.log.Check(zapcore.DebugLevel, "released"); ce != nil {
		ce.Write(zap.String("name", l.name), zap.Stringer("token", l.Token()))
	}
	return nil
}

// finish moves the lock to a final state unless it is in one already.
func (l *Lock) finish(state lockState, err error) bool {
	l.mu.Lock()
	if l.state == stateLost || l.state == stateReleased {
		l.mu.Unlock()
		return false
	}
	m := l.s.cfg.metrics
	if l.state == stateAcquiring {
		m.Waiting(-1)
	} else {
		var lost error
		if state == stateLost {
			lost = err
		}
		m.Ended(l.s.cfg.clock.Since(l.since), lost)
	}
	l.state, l.err = state, err
	// A holder asked to stop by Break that releases ends cleanly: it
	// stopped before it released.
	clean := state == stateReleased || errors.Is(err, ErrBreakRequested)
	ws := append([]*watchmux.Watch{l.watch}, l.kind.end(clean && !l.s.ledger.abandoned.Load())...)
	l.watch = nil
	acquiring := l.acquiring
	l.mu.Unlock()
	// Stop watching the keys before a Release deletes them, so etcd does
	// not send the holder its own delete.
	for _, w := range ws {
		l.s.mux.Remove(w)
	}
	l.cancel(err)
	if acquiring != nil {
		acquiring(err)
	}
	return true
}

// bind returns ctx, canceled also — with l's cause — when l ends (the
// session is lost or closed, or l is lost), and its stop function, which
// the acquisition calls when it returns (it ends the acquisition's count
// in Session.inflight, taken by claim). An
// acquisition runs its requests on it: clientv3 waits for a connection
// (WaitForReady) for as long as ctx allows, and without bind a request
// sent while etcd is unreachable would outlive the session it is for.
//
// finish cancels it. (context.AfterFunc on l.ctx would do the same, but
// leaves l.ctx an empty map of children for as long as l is held: about
// 370 bytes a lock.)
func (l *Lock) bind(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	l.mu.Lock()
	ended, err := l.state == stateLost || l.state == stateReleased, l.err
	if !ended {
		l.acquiring = cancel
	}
	l.mu.Unlock()
	if ended {
		cancel(err)
	}
	return ctx, func() {
		l.mu.Lock()
		l.acquiring = nil
		l.mu.Unlock()
		cancel(nil)
		l.s.claims.inflight.Done()
	}
}

// waits calls l's wait hook, the first time only (see WithWaitHook). Only
// the acquiring goroutine calls it.
func (l *Lock) waits() {
	if fn := l.waitHook; fn != nil {
		l.waitHook = nil
		fn()
	}
}

// lose marks the lock lost and drops the session's claim on its name.
func (l *Lock) lose(cause, detail error) {
	err := &LostError{Kind: ErrLost, Cause: cause, Detail: detail, At: l.s.cfg.clock.Now()}
	if l.finish(stateLost, err) {
		l.mu.Lock() // a semaphore's acquisition may still be claiming a slot
		tok, others := l.Token(), l.kind.otherKeys()
		l.mu.Unlock()
		// A break request leaves every key to the holder's Release: the
		// names stay taken until its work has stopped.
		if len(others) > 0 && !errors.Is(cause, ErrBreakRequested) {
			// The lock's other keys outlive the one whose loss ended it:
			// the renewal loop deletes them, so that they hold no slot or
			// name for the rest of the session.
			l.s.addLeftovers(l, append([]string{l.key}, others...)...)
			l.s.sweepSoon()
		}
		l.s.unclaim(l)
		l.s.log.Warn("lock lost", zap.String("name", l.name), zap.Stringer("token", tok), zap.Error(err))
	}
}

// deleteKeys deletes l's keys, each only if it is still the one l wrote
// (each transaction sent again, retried, while a member holds it
// unanswered: a compare-and-delete repeated is a no-op):
// the contender key by its create revision, with the keys of l's kind
// (kind.deleteOps) in the same transaction, nested, one conditional
// delete per key.
//
// held says l was acquired, so that every key is most likely still l's.
// The first transaction is then one flat compare-and-delete of them all,
// which etcd applies faster than the nested one (about 30 µs of a
// semaphore's release, hack/README.md); only when a key is not l's any
// more (gone with a loss, deleted by an operator) does the nested one
// follow, to delete each key that still is. Both delete exactly the keys
// the nested one alone would, so a retry stays safe either way.
func (l *Lock) deleteKeys(ctx context.Context, held bool) error {
	l.mu.Lock()
	ops := l.kind.deleteOps(l)
	l.mu.Unlock()
	c := l.s.client
	if len(ops) == 0 {
		_, err := retried(ctx, c, nil, func(ctx context.Context) (bool, error) {
			return request.CompareAndDelete(ctx, c, l.key, l.rev)
		})
		return err
	}
	ops = append(ops, deleteIfCreated(l.key, l.rev))
	if held {
		cmps, dels := joined(ops)
		resp, err := retried(ctx, c, nil, func(ctx context.Context) (*clientv3.TxnResponse, error) {
			return c.Txn(ctx).If(cmps...).Then(dels...).Commit()
		})
		if err != nil || resp.Succeeded {
			return err
		}
	}
	_, err := retried(ctx, c, nil, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return c.Txn(ctx).Then(ops...).Commit()
	})
	return err
}

// joined returns the comparisons and the operations of every transaction
// in ops (each an If without an Else), in order: one transaction that
// does what all of ops do when every comparison holds.
func joined(ops []clientv3.Op) (cmps []clientv3.Cmp, then []clientv3.Op) {
	for _, op := range ops {
		c, t, _ := op.Txn()
		cmps = append(cmps, c...)
		then = append(then, t...)
	}
	return cmps, then
}

// maxTxnOps is the most operations etcdlock puts in one transaction: half
// etcd's default --max-txn-ops (128).
const maxTxnOps = 64

// commitInChunks commits ops, in order, in transactions of at most
// maxTxnOps each. It stops at the first error.
func commitInChunks(ctx context.Context, c *clientv3.Client, ops []clientv3.Op) error {
	return txnInChunks(ctx, c, ops, func([]*etcdserverpb.ResponseOp) {})
}

// txnInChunks is commitInChunks that hands each transaction's responses,
// in the order of ops, to each.
func txnInChunks(ctx context.Context, c *clientv3.Client, ops []clientv3.Op, each func([]*etcdserverpb.ResponseOp)) error {
	for len(ops) > 0 {
		n := min(len(ops), maxTxnOps)
		resp, err := c.Txn(ctx).Then(ops[:n]...).Commit()
		if err != nil {
			return err
		}
		each(resp.Responses)
		ops = ops[n:]
	}
	return nil
}
