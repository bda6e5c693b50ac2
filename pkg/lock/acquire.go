package lock

import (
	"context"
	"errors"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/etcdlock/etcdlock/pkg/internal/keyspace"
	"github.com/etcdlock/etcdlock/pkg/internal/watchmux"
)

// Acquire blocks until the session owns name, ctx ends, or the session is
// lost. Contenders are served in FIFO order of their keys' creation; each
// waiter watches only its immediate predecessor, so a release wakes exactly
// one waiter. Ownership is re-checked in one read after every wait.
//
// An uncontended Acquire costs one round trip.
//
// Every successful Acquire gets a token no earlier acquisition was given:
// it never adopts an existing key. A key that an earlier acquisition of
// name on this session left behind (its Release or clean-up failed, or its
// delete is still in flight) is removed by a compare-and-delete on that
// key's own token and replaced by a fresh key, whose new create revision
// the earlier acquisition's retried Release cannot match. That costs two
// more round trips, only when there is such a leftover.
//
// On failure — ctx ended, the waiter's key deleted, the session lost, or a
// write (the claim) failed — the waiter's key is removed on a fresh context
// bounded by the cleanup timeout (unless the session was lost: its lease
// takes the key), and the error says why (ctx.Err(), ErrKeyDeleted,
// ErrWatchRefused, the session's error, etcd's error). Once ctx has ended,
// the error matches ctx.Err() even when etcd answered a request in flight
// first with its own "request timed out" (kept in the chain). A waiter whose
// session's lease is revoked — lock.Break of another lock of the session —
// finds its key deleted, asks etcd whether the lease lives, and returns
// the session's loss (ErrLeaseRevoked).
//
// While it waits, an Acquire does not fail because etcd is briefly
// unreachable or electing a leader: its reads are retried and its watch
// re-established, until ctx ends or the session is lost, which ends every
// request of the Acquire at once.
//
// A session holds at most one claim per name: while a Lock for name is
// active, or another Acquire/TryAcquire of name is in progress, Acquire
// returns ErrAlreadyClaimed at once. After the Lock is released or lost, the
// name can be acquired again; an Acquire that overlaps the previous Lock's
// Release waits for that Release to finish, and replaces the key if the
// Release failed to delete it.
//
// opts (WithLimit, WithShared, WithLockDelay) override the session's
// defaults; a nil or invalid one, or two that cannot be combined, fail
// with ErrInvalidOption before etcd is contacted (see
// ValidateAcquireOptions).
func (s *Session) Acquire(ctx context.Context, name string, opts ...AcquireOption) (*Lock, error) {
	l, ctx, stop, err := s.start(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	defer stop()
	pfx := keyspace.Of(s.cfg.prefix, name).Contenders()
	q, err := s.enqueue(ctx, l, pfx)
	if err != nil {
		return nil, s.failAcquire(ctx, l, err)
	}
	s.watchKey(l, q.rev)
	if err := s.wait(ctx, l, pfx, q); err != nil {
		return nil, s.failAcquire(ctx, l, err)
	}
	return s.activated(ctx, l)
}

// wait is the rest of Acquire for l, whose key is queued (q): its kind's
// wait for its turn, then what the kind claims beyond its key — a
// semaphore's slot (acquireSlot), a lock-delay's marker (holdMarker).
func (s *Session) wait(ctx context.Context, l *Lock, pfx string, q queued) error {
	switch h := l.kind.(type) {
	case *slotHold:
		return s.acquireSlot(ctx, l, h, pfx, q)
	case *delayHold:
		if err := s.takeTurn(ctx, l, pfx, q.older); err != nil {
			return err
		}
		return s.holdMarker(ctx, l, h)
	}
	return s.takeTurn(ctx, l, pfx, q.older)
}

// start checks opts and claims name for an acquisition: it returns the
// Lock being acquired, ctx bound to it (see Lock.bind), and bind's stop,
// which the caller defers.
func (s *Session) start(ctx context.Context, name string, opts []AcquireOption) (*Lock, context.Context, func(), error) {
	ac, err := newAcquireConfig(s.cfg.acquire, opts)
	if err != nil {
		return nil, nil, nil, err
	}
	l, err := s.claim(ctx, []string{name}, ac)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, stop := l.bind(ctx)
	return l, ctx, stop, nil
}

// queued is what the acquiring transaction (enqueue) did and read.
type queued struct {
	rev     int64                       // its revision: l's key's create revision
	claimed bool                        // a semaphore's contender claimed a slot with its key (queueSemaphore)
	slot    int                         // if claimed, that slot
	older   *etcdserverpb.RangeResponse // unless claimed, the keys older than l's that l needs (olderOp)
	slots   *etcdserverpb.RangeResponse // unless claimed, a semaphore's slot keys, Header set
}

// enqueue writes l's contender key under pfx in the acquiring transaction,
// first replacing a key that an earlier acquisition of the name on this
// session left (see removeLeftover). Its reply holds the keys older than
// l's that l needs (see olderOp) and, for a semaphore, the slot keys. A
// semaphore's contender that finds no key at all under the name claims
// slot 0 in the same transaction instead (see queueSemaphore).
func (s *Session) enqueue(ctx context.Context, l *Lock, pfx string) (queued, error) {
	queue := s.queue
	if l.semaphore() != nil {
		queue = s.queueSemaphore
	}
	for {
		q, leftover, err := queue(ctx, l, pfx)
		if err != nil || leftover == nil {
			return q, err
		}
		if err := s.removeLeftover(ctx, leftover); err != nil {
			return queued{}, err
		}
	}
}

// queue sends the acquiring transaction of a plain lock or a reader once:
// it writes l's contender key unless this session has a key under the
// name already, a leftover, which it returns instead.
func (s *Session) queue(ctx context.Context, l *Lock, pfx string) (queued, *mvccpb.KeyValue, error) {
	absent, then, mine := s.queueOps(l, pfx)
	resp, err := s.client.Txn(ctx).If(absent...).Then(then...).Else(mine...).Commit()
	if err != nil {
		return queued{}, nil, err
	}
	q, leftover := queuedBy(resp.Header.Revision, (*etcdserverpb.TxnResponse)(resp))
	return q, leftover, nil
}

// queueOps are the acquiring transaction's parts: If l's key is absent,
// Then read the older keys l needs (olderOp) and put it, Else read it.
func (s *Session) queueOps(l *Lock, pfx string) (absent []clientv3.Cmp, then, mine []clientv3.Op) {
	absent = []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(l.key), "=", 0)}
	then = []clientv3.Op{l.olderOp(pfx), clientv3.OpPut(l.key, l.value, clientv3.WithLease(s.lease))}
	mine = []clientv3.Op{clientv3.OpGet(l.key)}
	return absent, then, mine
}

// queuedBy reads r, the reply of the acquiring transaction (queueOps) at
// revision rev: what it queued, or the leftover key that stopped it.
func queuedBy(rev int64, r *etcdserverpb.TxnResponse) (queued, *mvccpb.KeyValue) {
	if !r.Succeeded {
		return queued{}, r.Responses[0].GetResponseRange().Kvs[0]
	}
	return queued{rev: rev, older: r.Responses[0].GetResponseRange()}, nil
}

// olderOp reads, in the acquiring transaction and before its put, the keys
// under pfx that l needs: the newest — the new key's predecessor — so that
// a waiter can start watching it without another read; for a reader the
// newest readerPageSize, to find the newest writer among them; for a
// semaphore all of them, to count them and check their limits.
func (l *Lock) olderOp(pfx string) clientv3.Op {
	switch l.kind.(type) {
	case *slotHold:
		return clientv3.OpGet(pfx, clientv3.WithPrefix())
	case reader:
		return clientv3.OpGet(pfx, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(readerPageSize))
	}
	return clientv3.OpGet(pfx, clientv3.WithLastCreate()...)
}

// takeTurn is a lock's or a reader's wait for its turn, once its key is
// queued: older is what the acquiring transaction read of the keys older
// than l's (olderOp). It waits until no key l must wait for is older.
func (s *Session) takeTurn(ctx context.Context, l *Lock, pfx string, older *etcdserverpb.RangeResponse) error {
	if len(older.Kvs) > 0 {
		if err := behindSemaphore(l, older.Kvs[0]); err != nil {
			return err
		}
	}
	if wait, pred := turnFromAcquire(l, older); wait {
		l.waits()
		return s.waitTurn(ctx, l, l.key, pfx, pred)
	}
	return nil
}

// activated activates l, or cleans up if it was lost meanwhile.
func (s *Session) activated(ctx context.Context, l *Lock) (*Lock, error) {
	if err := l.activate(); err != nil {
		return nil, s.failAcquire(ctx, l, err)
	}
	// Check first: the fields would be built (and allocated) on every
	// acquisition even with debug logging off.
	if ce := s.log.Check(zapcore.DebugLevel, "acquired"); ce != nil {
		fields := []zap.Field{zap.String("name", l.name), zap.Stringer("token", l.Token())}
		if l.set() != nil {
			fields = append(fields, zap.Strings("names", l.Names()))
		}
		ce.Write(fields...)
	}
	return l, nil
}

// turnFromAcquire reads what the acquiring transaction returned about the
// keys older than l's: whether l must wait, and the older key to wait for
// if the reply names it ("" if waitTurn must read it).
func turnFromAcquire(l *Lock, older *etcdserverpb.RangeResponse) (wait bool, pred string) {
	if !l.Shared() {
		if len(older.Kvs) == 0 {
			return false, ""
		}
		return true, string(older.Kvs[0].Key)
	}
	for _, kv := range older.Kvs {
		if excludesReader(kv.Value) {
			return true, string(kv.Key)
		}
	}
	return older.More, ""
}

// watchKey records that l's key (every key of a set) was created at
// revision created, and watches it from there on.
func (s *Session) watchKey(l *Lock, created int64) {
	l.rev = created
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.unreleased) > 0 {
		s.rewrote(l.Names())
	}
	if s.err != nil {
		return // l was finished by the session's end; nothing to watch
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state != stateAcquiring {
		return
	}
	l.watch = s.mux.WatchHeld(l.key, created+1, created, ownWatchDelay, l.keyGone)
	if h := l.set(); h != nil {
		h.watch(s, l, created)
	}
}

// keyGone is the watch callback of l's keys: err is nil when the key was
// deleted, watchmux.ErrModified when someone else wrote it (a break
// request: see Break), else why etcd refused the watch. A deletion is a
// question to etcd (keyDeleted), asked on a goroutine of the session's
// group, not on the session's watch stream's: the mux runs it, counted in
// the same group, so the group cannot be waited for meanwhile.
func (l *Lock) keyGone(err error) {
	switch {
	case errors.Is(err, watchmux.ErrModified):
		l.lose(ErrBreakRequested, nil)
		return
	case err != nil:
		l.lose(ErrWatchRefused, err)
		return
	}
	s := l.s
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.keyDeleted(l)
	}()
}

// activate moves l from acquiring to active, unless it was lost meanwhile.
func (l *Lock) activate() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state != stateAcquiring {
		return l.err
	}
	l.state = StateActive
	now := l.s.cfg.clock.Now()
	m := l.s.cfg.metrics
	m.Waiting(-1)
	m.Acquired(now.Sub(l.since))
	l.since = now
	return nil
}
