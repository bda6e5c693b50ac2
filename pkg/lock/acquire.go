package lock

import (
	"context"
	"errors"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/etcdlock/etcdlock/pkg/internal/watchmux"
)

// Acquire blocks until the session holds name, in FIFO order, ctx ends, or
// the session is lost; its token was never given to another acquisition.
// On failure it removes its key and returns why (ctx's error, matched by
// errors.Is; a loss; ErrLimitMismatch; etcd's error), or ErrAlreadyClaimed
// while the session claims name. opts override the session's defaults.
func (s *Session) Acquire(ctx context.Context, name string, opts ...AcquireOption) (*Lock, error) {
	l, ctx, stop, err := s.start(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	defer stop()
	return l.acquire(ctx, false)
}

// TryAcquire acquires name if no one holds it or waits for it, waiting out
// a lock-delay within ctx; otherwise it returns a *LockedError naming the
// holder and leaves no key behind. Its other errors are Acquire's.
func (s *Session) TryAcquire(ctx context.Context, name string, opts ...AcquireOption) (*Lock, error) {
	l, ctx, stop, err := s.start(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	defer stop()
	return l.acquire(ctx, true)
}

// start checks opts and claims name for an acquisition: it returns the
// Lock being acquired, ctx bound to it (see Lock.bind), and bind's stop,
// which the caller defers.
func (s *Session) start(ctx context.Context, name string, opts []AcquireOption) (*Lock, context.Context, func(), error) {
	// The session's defaults were checked by NewSession, and alone they
	// choose one kind: of the options that choose a kind, only
	// WithLockDelay is a SessionOption.
	ac, err := s.cfg.acquire, error(nil)
	if len(opts) > 0 {
		if ac, err = newAcquireConfig(ac, opts); err != nil {
			return nil, nil, nil, err
		}
	}
	l, err := s.claim(ctx, []string{name}, ac)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, stop := l.bind(ctx)
	return l, ctx, stop, nil
}

// acquire is Acquire, TryAcquire (try) and AcquireAll once l is claimed
// and ctx bound to it: l's kind writes its keys (queue, or try), they are
// watched, the kind waits until l holds, and l becomes active. A queue
// that finds keys an earlier acquisition of l's names on this session
// left writes nothing: they are replaced (removeLeftover), and l queued
// again. On failure it cleans up (failAcquire, or failTry for a try that
// wrote nothing).
func (l *Lock) acquire(ctx context.Context, try bool) (*Lock, error) {
	s := l.s
	var q queued
	var err error
	if try {
		if q, err = l.kind.try(ctx, l); err != nil {
			return nil, l.failTry(ctx, err)
		}
	}
	for !try && q.rev == 0 {
		var leftovers []*mvccpb.KeyValue
		if q, leftovers, err = l.kind.queue(ctx, l); err != nil {
			return nil, l.failAcquire(ctx, err)
		}
		for _, kv := range leftovers {
			if err = s.removeLeftover(ctx, kv); err != nil {
				return nil, l.failAcquire(ctx, err)
			}
		}
	}
	l.watchKey(q.rev)
	if err := l.kind.wait(ctx, l, q); err != nil {
		return nil, l.failAcquire(ctx, err)
	}
	return l.activated(ctx)
}

// queued is what the acquiring transaction (kind.queue, kind.try) did and
// read.
type queued struct {
	rev     int64                       // its revision: l's keys' create revision; 0 if it wrote none
	older   *etcdserverpb.RangeResponse // the keys older than l's that l's kind reads; nil after a try
	claimed bool                        // a semaphore's contender claimed a slot with its key
	slot    int                         // if claimed, that slot
	slots   *etcdserverpb.RangeResponse // unless claimed, a semaphore's slot keys, Header set
	preds   []*mvccpb.KeyValue          // an AcquireAll's: each name's predecessor, or nil
}

// queue sends the acquiring transaction of l's contender key:
// If(l's key is absent) Then(older, the kind's read of the older keys,
// before the put; Put(l's key)) Else(Get(l's key)), a leftover, which it
// returns instead. A try a member holds unanswered is sent again
// (retried): if it was applied, the next finds its key, which is
// replaced as any leftover is, never adopted.
func (l *Lock) queue(ctx context.Context, older clientv3.Op) (queued, []*mvccpb.KeyValue, error) {
	s := l.s
	absent, then, mine := l.queueOps(older)
	resp, err := retried(ctx, s.client, l.mayLand, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return s.client.Txn(ctx).If(absent...).Then(then...).Else(mine...).Commit()
	})
	if err != nil {
		return queued{}, nil, err
	}
	q, leftovers := queuedBy(resp.Header.Revision, (*etcdserverpb.TxnResponse)(resp))
	return q, leftovers, nil
}

// queueOps are the acquiring transaction's parts (see queue).
func (l *Lock) queueOps(older clientv3.Op) (absent []clientv3.Cmp, then, mine []clientv3.Op) {
	s := l.s
	absent = []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(l.key), "=", 0)}
	then = []clientv3.Op{older, clientv3.OpPut(l.key, l.value, clientv3.WithLease(s.keeper.id))}
	mine = []clientv3.Op{clientv3.OpGet(l.key)}
	return absent, then, mine
}

// queuedBy reads r, the reply of the acquiring transaction (queueOps) at
// revision rev: what it queued, or the leftover key that stopped it.
func queuedBy(rev int64, r *etcdserverpb.TxnResponse) (queued, []*mvccpb.KeyValue) {
	if !r.Succeeded {
		return queued{}, r.Responses[0].GetResponseRange().Kvs[:1]
	}
	return queued{rev: rev, older: r.Responses[0].GetResponseRange()}, nil
}

// watchKey records that l's keys were created at revision created, and
// watches them from there on.
func (l *Lock) watchKey(created int64) {
	s := l.s
	l.rev = created
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ledger.markers) > 0 {
		s.rewrote(l.names())
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
	l.kind.watch(l, created)
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
		l.keyDeleted()
	}()
}

// activated moves l from acquiring to active, or cleans up if it was
// lost meanwhile.
func (l *Lock) activated(ctx context.Context) (*Lock, error) {
	s := l.s
	l.mu.Lock()
	if l.state != stateAcquiring {
		err := l.err
		l.mu.Unlock()
		return nil, l.failAcquire(ctx, err)
	}
	l.state = stateActive
	now := s.cfg.clock.Now()
	s.cfg.metrics.Waiting(-1)
	s.cfg.metrics.Acquired(now.Sub(l.since))
	l.since = now
	l.mu.Unlock()
	// Check first: the fields would be built (and allocated) on every
	// acquisition even with debug logging off.
	if ce := s.log.Check(zapcore.DebugLevel, "acquired"); ce != nil {
		fields := []zap.Field{zap.String("name", l.name), zap.Stringer("token", l.Token())}
		if names, _ := l.kind.others(); len(names) > 0 {
			fields = append(fields, zap.Strings("names", l.names()))
		}
		ce.Write(fields...)
	}
	return l, nil
}

// failTry ends a TryAcquire that failed with err: one that found the name
// taken (a *LockedError) or of another kind (ErrLimitMismatch) wrote no
// key, or removed it, and only drops its claim; any other is a failed
// acquisition (failAcquire).
func (l *Lock) failTry(ctx context.Context, err error) error {
	s := l.s
	var locked *LockedError
	if errors.As(err, &locked) || errors.Is(err, ErrLimitMismatch) {
		s.unclaim(l)
		l.finish(stateReleased, ErrReleased)
		// A try a member held unanswered may still write the key once the
		// name is free.
		l.landLate()
		return err
	}
	return l.failAcquire(ctx, err)
}
