package election

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/pkg/clock"
	"github.com/etcdlock/etcdlock/pkg/internal/backoff"
	"github.com/etcdlock/etcdlock/pkg/internal/keyspace"
	"github.com/etcdlock/etcdlock/pkg/internal/watchmux"
	"github.com/etcdlock/etcdlock/pkg/lease"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// errTenureGone is the detail of a term lost because its tenure key, or
// the key's lease, was deleted by someone else while the leader key lived.
var errTenureGone = errors.New("election: the term's tenure key is gone (deleted, or its lease revoked)")

// tenure is a term's tenure key and the key's own lease, which only the
// term's proofs renew: the key outlives the term's context, so the next
// leader, which waits until every earlier term's tenure key is gone,
// never starts beside it (see the package documentation and
// pkg/lock/DESIGN.md, "Elections: the tenure key").
type tenure struct {
	client   *clientv3.Client
	l        *lock.Lock
	key      string // the tenure key
	others   string // the prefix of every tenure key of the election
	identity string // the term's, for an operator's eyes
	ttl      time.Duration
	clock    clock.Clock   // the session's
	margin   time.Duration // the session's safety margin
	every    time.Duration // between proofs, from the last one's send time
	retry    time.Duration // between tries after a failure
	fault    func() error  // the tests' fault injection, nil otherwise
	log      *zap.Logger
	// lease is the tenure lease, 0 until granted; claim sets it, and ttl,
	// before any other goroutine reads them.
	lease clientv3.LeaseID

	mu       sync.Mutex
	deadline time.Time // the last proof's send time + ttl − margin
	lastErr  error     // the last failure since the last proof
}

// newTenure returns the tenure of l, won on session s under cfg and the
// settings of its options, set.
func newTenure(cfg *Config, set session, s *lock.Session, l *lock.Lock, log *zap.Logger) *tenure {
	keys := keyspace.Of(set.prefix, cfg.Name)
	every := s.TTL() / 3
	return &tenure{client: cfg.Client, l: l, key: keys.Tenure(int64(s.Lease()), int64(l.Token())), others: keys.Tenures(),
		identity: set.identity, ttl: s.TTL(), clock: set.clock, margin: lease.Margin(set.margin, s.TTL()), every: every,
		retry: min(every/4, 250*time.Millisecond), fault: cfg.proofFault, log: log}
}

// Deadline is when the term ends unless a proof comes first.
func (t *tenure) Deadline() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.deadline
}

// tenureValue is a tenure key's value: the term's identity and, once the
// term has begun, when it began on the leader's clock (GetLeader's Since).
type tenureValue struct {
	Identity string    `json:"identity"`
	Started  time.Time `json:"started,omitzero"`
}

// encode is the tenure key's value for a term that began at started (zero:
// not yet).
func (t *tenure) encode(started time.Time) string {
	b, _ := json.Marshal(tenureValue{Identity: t.identity, Started: started}) // cannot fail
	return string(b)
}

// claim grants the tenure lease and, while the leader key exists, writes
// the tenure key on it and reads every other term's, retrying etcd's
// errors, and returns those others. The key says the term began at
// started, as it does if there are no others; otherwise the elector marks
// it as not begun before it waits for them (see GetLeader). It fails once
// the lock ends or ctx does.
func (t *tenure) claim(ctx context.Context, started time.Time) (others []*mvccpb.KeyValue, err error) {
	var sent time.Time
	value := t.encode(started)
	// The put is idempotent: a retry after a lost reply writes the same.
	err = t.retrying(ctx, func(ctx context.Context) error {
		if t.lease == 0 {
			sent = t.clock.Now()
			g, err := t.client.Grant(ctx, lease.Seconds(t.ttl))
			if err != nil {
				return err
			}
			t.lease, t.ttl = g.ID, time.Duration(g.TTL)*time.Second
		}
		resp, err := t.client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(t.l.Key()), "=", int64(t.l.Token()))).
			Then(clientv3.OpGet(t.others, clientv3.WithPrefix()), clientv3.OpPut(t.key, value, clientv3.WithLease(t.lease))).
			Commit()
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			t.lease = 0 // expired while etcd was slow: grant another
		}
		if err != nil {
			return err
		}
		if !resp.Succeeded {
			return t.keyGone(ctx)
		}
		var ignored []*mvccpb.KeyValue
		others, ignored = awaited(resp.Responses[0].GetResponseRange().Kvs, t.key)
		for _, kv := range ignored {
			t.log.Warn("ignoring a key without a lease among the tenure keys", zap.ByteString("key", kv.Key))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// The lease was granted, and so refreshed by etcd, after sent: the
	// tenure key cannot expire before sent + ttl.
	t.proven(sent)
	return others, nil
}

// mark writes when the term began, started (zero: not yet), into the
// tenure key, while the leader key and the tenure key are still the
// term's, retrying etcd's errors. It fails with errTenureGone when the
// tenure key or its lease is gone, once the lock ends, or when ctx does.
func (t *tenure) mark(ctx context.Context, started time.Time) error {
	value := t.encode(started)
	return t.retrying(ctx, func(ctx context.Context) error {
		resp, err := t.client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(t.l.Key()), "=", int64(t.l.Token())),
				clientv3.Compare(clientv3.LeaseValue(t.key), "=", t.lease)).
			Then(clientv3.OpPut(t.key, value, clientv3.WithLease(t.lease))).
			Commit()
		if err != nil || resp.Succeeded {
			return err
		}
		if err := t.l.Confirm(ctx); err != nil {
			return err
		}
		return errTenureGone
	})
}

// retrying calls try until it succeeds, retrying etcd's errors with
// backoff (on the real clock: it paces requests to etcd), each try bounded
// by the time between proofs. It fails once the lock ends or ctx does.
func (t *tenure) retrying(ctx context.Context, try func(context.Context) error) error {
	b := backoff.Backoff{Min: t.retry, Max: t.every, Jitter: true}
	for {
		tctx, cancel := context.WithTimeout(ctx, t.every)
		err := try(tctx)
		cancel()
		switch {
		case err == nil:
			return nil
		case errors.Is(err, lock.ErrLost), errors.Is(err, errTenureGone):
			return err
		case t.l.Err() != nil:
			return t.l.Err()
		case ctx.Err() != nil:
			return ctx.Err()
		}
		t.log.Debug("etcd error; retrying", zap.Error(err))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.l.Context().Done():
			return t.l.Err()
		case <-time.After(b.Next()):
		}
	}
}

// keyGone is the error of a request that found the leader key gone: the
// lock's, once Lock.Confirm has seen the key gone too.
func (t *tenure) keyGone(ctx context.Context) error {
	if err := t.l.Confirm(ctx); err != nil {
		return err
	}
	return fmt.Errorf("election: the leader key %q was gone, then found again", t.l.Key())
}

// awaitOthers waits until every key of others is gone: it watches the
// tenure keys from the revision etcd creates the watch at, on mux, then
// reads them again, linearizably, and again after each deletion. (etcd
// serves a watch from a past revision from its "unsynced" group, caught up
// only every 100 ms.) It fails when etcd refuses the watch, or when ctx
// (Run's) or term (the term's) ends: with term's cause, or ctx's error.
func (t *tenure) awaitOthers(ctx, term context.Context, mux *watchmux.Mux, others []*mvccpb.KeyValue) error {
	wctx, cancel := context.WithCancel(term)
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	for {
		fired, created := make(chan error, 1), make(chan struct{}, 1)
		w := mux.WatchRange(watchmux.Range{Key: t.others, End: clientv3.GetPrefixRangeEnd(t.others)}, nil,
			func(err error) { fired <- err }, func() { created <- struct{}{} })
		err := t.awaitOne(wctx, fired, created, others)
		mux.Remove(w)
		switch {
		case errors.Is(err, errWatchAgain):
			continue
		case err == nil || ctx.Err() != nil:
			return err
		case term.Err() != nil:
			return context.Cause(term)
		}
		return err
	}
}

// errWatchAgain says that the watch of awaitOthers fired before every key
// it waits for was gone.
var errWatchAgain = errors.New("watch again")

// awaitOne is one watch of awaitOthers: nil once every key of others is
// gone, errWatchAgain once the watch fired before.
func (t *tenure) awaitOne(ctx context.Context, fired chan error, created chan struct{}, others []*mvccpb.KeyValue) error {
	wait := func(ch <-chan struct{}) error {
		select {
		case err := <-fired:
			if err != nil {
				return fmt.Errorf("election: watching the earlier terms' tenure keys: %w", err)
			}
			return errWatchAgain
		case <-ch:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	if err := wait(created); err != nil {
		return err
	}
	err := t.retrying(ctx, func(ctx context.Context) error {
		resp, err := t.client.Get(ctx, t.others, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			return err
		}
		others = remaining(others, resp.Kvs)
		return nil
	})
	if err != nil || len(others) == 0 {
		return err
	}
	return wait(nil) // a nil channel: until the watch fires
}

// awaited splits the tenure keys kvs, read by the term whose own tenure
// key is own, into those it waits for — every other term's — and those it
// ignores: keys without a lease, which no term writes.
func awaited(kvs []*mvccpb.KeyValue, own string) (wait, ignored []*mvccpb.KeyValue) {
	for _, kv := range kvs {
		switch {
		case string(kv.Key) == own:
		case kv.Lease == 0:
			ignored = append(ignored, kv)
		default:
			wait = append(wait, kv)
		}
	}
	return wait, ignored
}

// remaining are the keys of awaited still among kvs, read later: same key,
// same create revision.
func remaining(awaited, kvs []*mvccpb.KeyValue) []*mvccpb.KeyValue {
	return slices.DeleteFunc(slices.Clone(awaited), func(a *mvccpb.KeyValue) bool {
		return !slices.ContainsFunc(kvs, func(kv *mvccpb.KeyValue) bool {
			return string(kv.Key) == string(a.Key) && kv.CreateRevision == a.CreateRevision
		})
	})
}

// drop deletes the tenure key, on a fresh context bounded by
// cleanupTimeout; its lease, renewed no more, expires. Call it only once
// the term's context has ended. A delete that fails leaves the key to
// expire with the lease.
func (t *tenure) drop() {
	if t.lease == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if _, err := t.client.Delete(ctx, t.key); err != nil {
		t.log.Warn("could not delete the tenure key; it expires with its lease", zap.Error(err), zap.Duration("ttl", t.ttl))
	}
}
