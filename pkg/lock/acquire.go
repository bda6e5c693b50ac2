package lock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/lock/internal/keyspace"
	"github.com/etcdlock/etcdlock/pkg/lock/internal/watchmux"
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
// finds its key deleted first and returns ErrKeyDeleted; the session
// notices at its next renewal.
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
// opts are the options for Acquire listed in options.go; any other is
// rejected with ErrInvalidOption.
func (s *Session) Acquire(ctx context.Context, name string, opts ...Option) (*Lock, error) {
	ac, err := s.newAcquireConfig(opts)
	if err != nil {
		return nil, err
	}
	l, err := s.claim(ctx, []string{name}, ac)
	if err != nil {
		return nil, err
	}
	ctx, stop := l.bind(ctx)
	defer stop()
	pfx := keyspace.Of(s.cfg.prefix, name).Contenders()
	var resp *clientv3.TxnResponse
	for {
		// The Get before the Put returns the newest key already under the
		// name — the new key's predecessor — so a waiter can start
		// watching it without another read. A reader gets the newest
		// readerPageSize keys, to find the newest writer among them.
		older := clientv3.WithLastCreate()
		switch {
		case l.opts.semaphore():
			older = []clientv3.OpOption{clientv3.WithPrefix()} // all: to count them and check their limits
		case l.opts.shared:
			older = []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(readerPageSize)}
		}
		then := []clientv3.Op{clientv3.OpGet(pfx, older...), clientv3.OpPut(l.key, l.value, clientv3.WithLease(s.lease))}
		if l.opts.semaphore() {
			then = append(then, slotsOp(s.cfg.prefix, name)) // for the slot claim
		}
		resp, err = s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(l.key), "=", 0)).
			Then(then...).
			Else(clientv3.OpGet(l.key)).
			Commit()
		if err != nil {
			return nil, s.failAcquire(ctx, l, err)
		}
		if resp.Succeeded {
			break
		}
		if err := s.removeLeftoverOf(ctx, name, resp.Responses[0].GetResponseRange().Kvs[0]); err != nil {
			return nil, s.failAcquire(ctx, l, err)
		}
	}
	s.watchKey(l, fencing.Token(resp.Header.Revision), resp.Header.Revision+1)
	if l.opts.semaphore() {
		slots := resp.Responses[2].GetResponseRange()
		slots.Header = resp.Header
		return s.acquireSlot(ctx, l, pfx, resp.Responses[0].GetResponseRange().Kvs, slots)
	}
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		if err := behindSemaphore(l, kvs[0]); err != nil {
			return nil, s.failAcquire(ctx, l, err)
		}
	}
	wait, pred := turnFromAcquire(l, resp.Responses[0].GetResponseRange())
	if wait {
		if err := s.waitTurn(ctx, l, l.key, pfx, pred); err != nil {
			return nil, s.failAcquire(ctx, l, err)
		}
	}
	if l.opts.lockDelay > 0 {
		if err := s.holdMarker(ctx, l); err != nil {
			return nil, s.failAcquire(ctx, l, err)
		}
	}
	return s.activated(ctx, l)
}

// TryAcquire acquires name if no one holds it or waits for it, in one round
// trip (more for a reader, a semaphore or a lock-delay: see their
// options), and otherwise returns a *LockedError (wrapping ErrLocked)
// naming the current holder, leaving no key behind. Like Acquire it never adopts an
// existing key (a leftover of this session's earlier acquisition of name is
// removed and, if the name is then free, replaced by a fresh key), and it
// returns ErrAlreadyClaimed while the session already claims name.
func (s *Session) TryAcquire(ctx context.Context, name string, opts ...Option) (*Lock, error) {
	ac, err := s.newAcquireConfig(opts)
	if err != nil {
		return nil, err
	}
	l, err := s.claim(ctx, []string{name}, ac)
	if err != nil {
		return nil, err
	}
	ctx, stop := l.bind(ctx)
	defer stop()
	pfx := keyspace.Of(s.cfg.prefix, name).Contenders()
	if ac.shared || ac.semaphore() {
		try := s.tryShared
		if ac.semaphore() {
			try = s.trySemaphore
		}
		rev, err := try(ctx, l, pfx)
		var locked *LockedError
		if errors.As(err, &locked) || errors.Is(err, ErrLimitMismatch) {
			s.unclaim(l)
			l.finish(StateReleased, ErrReleased)
			return nil, err
		}
		if err != nil {
			return nil, s.failAcquire(ctx, l, err)
		}
		if ac.semaphore() {
			s.watchKey(l, fencing.Token(rev), rev+1)
			s.holdSlot(l, fencing.Token(rev))
			return s.activated(ctx, l)
		}
		return s.tryAcquired(ctx, l, rev)
	}
	var resp *clientv3.TxnResponse
	for {
		// The put happens only if no key exists under the name: a range
		// comparison is true for an empty range.
		resp, err = s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(pfx), "=", 0).WithPrefix()).
			Then(clientv3.OpPut(l.key, l.value, clientv3.WithLease(s.lease))).
			Else(clientv3.OpGet(pfx, clientv3.WithFirstCreate()...), clientv3.OpGet(l.key)).
			Commit()
		if err != nil {
			return nil, s.failAcquire(ctx, l, err)
		}
		if resp.Succeeded {
			break
		}
		holder := resp.Responses[0].GetResponseRange().Kvs[0]
		mine := resp.Responses[1].GetResponseRange().Kvs
		if len(mine) > 0 {
			// Left by an earlier acquisition: never adopted. Removed, then
			// the name is tried again if that leftover was its holder.
			if err := s.removeLeftoverOf(ctx, name, mine[0]); err != nil {
				return nil, s.failAcquire(ctx, l, err)
			}
			if string(holder.Key) == l.key {
				continue
			}
		}
		s.unclaim(l)
		l.finish(StateReleased, ErrReleased)
		return nil, lockedError(name, holder)
	}
	return s.tryAcquired(ctx, l, resp.Header.Revision)
}

// tryAcquired activates l, whose key a TryAcquire wrote at rev, after the
// lock-delay if there is one to wait.
func (s *Session) tryAcquired(ctx context.Context, l *Lock, rev int64) (*Lock, error) {
	s.watchKey(l, fencing.Token(rev), rev+1)
	if l.opts.lockDelay > 0 {
		if err := s.holdMarker(ctx, l); err != nil {
			return nil, s.failAcquire(ctx, l, err)
		}
	}
	return s.activated(ctx, l)
}

// activated activates l, or cleans up if it was lost meanwhile.
func (s *Session) activated(ctx context.Context, l *Lock) (*Lock, error) {
	if err := l.activate(); err != nil {
		return nil, s.failAcquire(ctx, l, err)
	}
	// Check first: the fields would be built (and allocated) on every
	// acquisition even with debug logging off.
	if ce := s.log.Check(zapcore.DebugLevel, "acquired"); ce != nil {
		fields := []zap.Field{zap.String("name", l.name), zap.Stringer("token", l.token)}
		if len(l.more) > 0 {
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
	if !l.opts.shared {
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

// waitTurn waits until no key under pfx that l must wait for is older than
// l's key: any key for a writer, a writer's key for a reader (WithShared).
// pred, if set, is the newest such key as of the acquiring write;
// otherwise the wait starts with a read.
//
// Each predecessor is watched from the revision etcd creates the watch at
// (see watchmux.Mux.WatchFromNow), then read again: if it is still there, the
// watch will see it go. Every read checks, in one linearizable request,
// that l's key still exists and which older key is the newest.
//
// The reads are linearizable, not serializable, although a serializable
// read would be safe here (older keys only ever disappear) and faster
// under write load: etcd can panic serving a serializable read on a member
// that is stopping (etcd-io/etcd#17223), which this project's fault suite
// hit with embedded members.
//
// own is l's key under pfx: l.key, or for AcquireAll the key of one of
// its names.
func (s *Session) waitTurn(ctx context.Context, l *Lock, own, pfx, pred string) error {
	var (
		w        *watchmux.Watch
		watching string     // the key w watches
		gone     chan error // receives w's firing: nil, or why etcd refused the watch
	)
	defer func() { s.mux.Remove(w) }()
	for {
		if pred == "" && l.opts.shared {
			p, err := s.olderWriter(ctx, l, pfx)
			if err != nil || p == "" {
				return err
			}
			pred = p
		}
		if pred == "" {
			resp, err := s.waitRead(ctx, l,
				clientv3.OpGet(own),
				clientv3.OpGet(pfx, append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(int64(l.token)-1))...),
			)
			if err != nil {
				return err
			}
			if mine := resp.Responses[0].GetResponseRange().Kvs; len(mine) == 0 || mine[0].CreateRevision != int64(l.token) {
				return ErrKeyDeleted
			}
			preds := resp.Responses[1].GetResponseRange().Kvs
			if len(preds) == 0 {
				return nil
			}
			if err := behindSemaphore(l, preds[0]); err != nil {
				return err
			}
			pred = string(preds[0].Key)
		}
		if pred != watching {
			// A new predecessor: watch it, then read again.
			s.mux.Remove(w)
			if ce := s.log.Check(zapcore.DebugLevel, "waiting"); ce != nil {
				ce.Write(zap.String("name", l.name), zap.String("predecessor", pred))
			}
			g, created := make(chan error, 1), make(chan struct{}, 1)
			w = s.mux.WatchFromNow(pred, func(err error) { g <- err }, func() {
				select {
				case created <- struct{}{}:
				default:
				}
			})
			watching, gone = pred, g
			select {
			case <-created:
			case err := <-gone:
				if err != nil {
					return fmt.Errorf("%w: %w", ErrWatchRefused, err)
				}
				watching = "" // gone already, or the watch broke
			case <-l.ctx.Done():
				return context.Cause(l.ctx)
			case <-ctx.Done():
				return ctx.Err()
			}
			pred = ""
			continue
		}
		select {
		case err := <-gone:
			if err != nil {
				return fmt.Errorf("%w: %w", ErrWatchRefused, err)
			}
			// Deleted, or the watch broke: either way re-read.
		case <-l.ctx.Done():
			return context.Cause(l.ctx)
		case <-ctx.Done():
			return ctx.Err()
		}
		watching, pred = "", ""
	}
}

// claim registers a new claim on name, or explains why there can be none.
// A claim whose lock is already released or lost but whose clean-up (the
// key's deletion) is still in flight is waited for, so that the new claim
// usually finds the name clean; what a failed clean-up leaves behind is
// replaced, not adopted (see removeLeftover).
//
// An AcquireAll claims every name of its set at once, or none.
func (s *Session) claim(ctx context.Context, names []string, ac acquireConfig) (*Lock, error) {
	for _, name := range names {
		if err := ValidateName(name); err != nil {
			return nil, err
		}
	}
	for {
		s.mu.Lock()
		if s.err != nil {
			s.mu.Unlock()
			return nil, s.err
		}
		var old *Lock
		for _, name := range names {
			if o, ok := s.claims[name]; ok {
				old = o
				break
			}
		}
		if old == nil {
			s.seq++
			ac.names = names
			l := &Lock{s: s, name: names[0], key: keyspace.Of(s.cfg.prefix, names[0]).Contender(int64(s.lease)), lost: make(chan struct{}), unclaimed: make(chan struct{}), opts: ac,
				value: newRecord(s.cfg.owner, s.cfg.origin, s.cfg.clock.Now(), s.seq, ac)}
			for _, name := range names[1:] {
				l.more = append(l.more, member{name: name, key: keyspace.Of(s.cfg.prefix, name).Contender(int64(s.lease))})
			}
			l.ctx, l.cancel = context.WithCancelCause(s.alive)
			l.since = s.cfg.clock.Now()
			for _, name := range names {
				s.claims[name] = l
			}
			s.inflight.Add(1) // done by bind's stop; under mu, before Close's end
			s.mu.Unlock()
			s.cfg.metrics.Waiting(1)
			return l, nil
		}
		s.mu.Unlock()
		if st := old.State(); st != StateLost && st != StateReleased {
			return nil, fmt.Errorf("%w: %q", ErrAlreadyClaimed, old.name)
		}
		select {
		case <-old.unclaimed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// unclaim drops l's claims on its names, where l still has them.
func (s *Session) unclaim(l *Lock) {
	s.mu.Lock()
	for _, name := range l.Names() {
		if s.claims[name] == l {
			delete(s.claims, name)
		}
	}
	s.mu.Unlock()
	l.unclaimOnce.Do(func() { close(l.unclaimed) })
}

// watchKey records l's token and watches its key from rev on.
func (s *Session) watchKey(l *Lock, token fencing.Token, rev int64) {
	l.token = token
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return // l was finished by the session's end; nothing to watch
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state != stateAcquiring {
		return
	}
	l.watch = s.mux.WatchKey(l.key, rev, int64(token), ownWatchDelay, l.keyGone)
	for i := range l.more {
		l.more[i].watch = s.mux.WatchKey(l.more[i].key, rev, int64(token), ownWatchDelay, l.keyGone)
	}
}

// keyGone is the watch callback of l's keys: err is nil when the key was
// deleted, else why etcd refused the watch.
func (l *Lock) keyGone(err error) {
	if err != nil {
		l.lose(ErrWatchRefused, err)
		return
	}
	l.lose(ErrKeyDeleted, nil)
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

// ctxEnded is ctx.Err(), or context.DeadlineExceeded once ctx's deadline
// has passed: ctx.Err() reports a deadline only after the timer that
// cancels ctx has run, which on a loaded machine can come after etcd's
// reply to a request that carried the same deadline.
func ctxEnded(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// asCtxErr returns err, or once ctx has ended an error matching ctx's
// error with err kept in the chain. A request in flight when the caller's
// ctx ends may be answered by etcd's own "request timed out" (the deadline
// travels with the request) before the client's deadline error: the caller
// still gets ctx's error.
func asCtxErr(ctx context.Context, err error) error {
	if cerr := ctxEnded(ctx); cerr != nil && err != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w (%w)", cerr, err)
	}
	return err
}

// failAcquire ends a failed acquisition, whose requests ran on ctx: it
// stops l, removes its key (on a fresh, bounded context), and returns err
// annotated, or the session's, lock's or ctx's error when that explains
// the failure better.
func (s *Session) failAcquire(ctx context.Context, l *Lock, err error) error {
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		s.lose(ErrLeaseExpired, err)
	}
	if cause := context.Cause(l.ctx); cause != nil && cause != context.Canceled {
		// l ended — the session was lost or closed, or l's key deleted —
		// which canceled the acquisition's requests (bind): that is why
		// it failed, whatever error its last request returned.
		err = cause
	} else {
		err = asCtxErr(ctx, err)
	}
	l.finish(StateReleased, ErrReleased)
	defer s.unclaim(l) // after the delete, so the next claim usually finds no leftover
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.cleanupTimeout)
	defer cancel()
	var cerr error
	if errors.Is(s.Err(), ErrSessionLost) {
		// The session was lost: its lease, no longer renewed, expires
		// by its TTL (or has) and takes l's keys with it; a delete would
		// only wait for an etcd the session could not reach. After Close
		// or Abandon the delete runs: Close's revoke may fail (its ctx
		// done), and a waiter's key would then block the name for a TTL.
	} else if l.token != 0 {
		cerr = l.deleteKeys(ctx)
	} else {
		// The reply was lost: the key may or may not exist. The delete
		// compares the value this acquisition wrote (unique within the
		// lease, see Record.Seq), so even arriving late it cannot remove
		// the key of this session's next acquisition of the name. It is a
		// write, which etcd orders after a put it received first (a read
		// could be served before that put is applied).
		// etcd may still apply a put it received after the clean-up (the
		// two requests race on the server, or the put was delayed in the
		// network): the key is then a stray, which the renewal loop
		// deletes after the next renewals (sweepStrays), and which the
		// session's next acquisition of the name would replace.
		// A semaphore's TryAcquire writes a slot key in the same
		// transaction, with the same value.
		keys := l.Keys()
		if l.slotKey != "" {
			keys = append(keys, l.slotKey)
		}
		for _, key := range keys {
			var resp *clientv3.TxnResponse
			resp, cerr = s.client.Txn(ctx).
				If(s.sameWrite(key, l.value)...).
				Then(clientv3.OpDelete(key)).Commit()
			if cerr != nil || !resp.Succeeded {
				s.addStrays(l, key)
			}
		}
	}
	if cerr != nil {
		s.log.Warn("could not remove abandoned key; it goes away with the lease", zap.String("key", l.key), zap.Error(cerr))
	}
	if err == nil {
		return nil
	}
	return fmt.Errorf("lock: acquire %q: %w", l.name, err)
}

// removeLeftover deletes kv, a key of this session's lease under a name
// the session is claiming now, which an earlier acquisition of that name
// left behind. The compare on kv's create revision makes the delete exact:
// it can remove only that earlier key, never one written after it.
func (s *Session) removeLeftover(ctx context.Context, kv *mvccpb.KeyValue) error {
	return s.removeLeftoverOf(ctx, "", kv)
}

// removeLeftoverOf is removeLeftover for a plain lock of name: the earlier
// acquisition's lock-delay marker, if any, goes in the same transaction.
// Its key still being there, nobody else held the name since: the
// earlier lock ended cleanly (its Release failed, or is still in flight).
func (s *Session) removeLeftoverOf(ctx context.Context, name string, kv *mvccpb.KeyValue) error {
	s.log.Debug("removing a key left by an earlier acquisition", zap.String("key", string(kv.Key)), zap.Int64("token", kv.CreateRevision))
	del := []clientv3.Op{clientv3.OpDelete(string(kv.Key))}
	if name != "" {
		del = append(del, clientv3.OpDelete(keyspace.Of(s.cfg.prefix, name).Marker(int64(s.lease), kv.CreateRevision)))
	}
	_, err := s.client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(string(kv.Key)), "=", kv.CreateRevision)).Then(del...).Commit()
	if err != nil {
		return fmt.Errorf("remove key left by an earlier acquisition: %w", err)
	}
	return nil
}
