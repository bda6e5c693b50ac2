package lock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/pkg/internal/keyspace"
	"github.com/etcdlock/etcdlock/pkg/internal/watchmux"
	"github.com/etcdlock/etcdlock/pkg/lease"
)

// maxLockDelay is the longest delay WithLockDelay accepts.
const maxLockDelay = time.Hour

// WithLockDelay makes a name whose holder ended uncleanly (lease expired or
// revoked, key deleted, session lost or abandoned) unavailable for d to
// every contender that uses it, as all must; not after Release or Close.
// Plain locks only, else ErrInvalidOption. A SessionOption (the default of
// its acquisitions) and an AcquireOption; d in [0, 1h], 0 (off) by default.
func WithLockDelay(d time.Duration) forSessionOrAcquire {
	return func(c *config) error {
		if d < 0 || d > maxLockDelay {
			return invalid("lock delay %v out of range [0, %v]", d, maxLockDelay)
		}
		c.acquire.lockDelay = d
		return nil
	}
}

// delayHold is the kind of a plain lock with a lock-delay
// (WithLockDelay): a plain lock that, once its turn comes, writes its
// marker and waits out the delay after an unclean end (holdMarker). d is
// its delay, marker its marker ("" until being written); clean is set
// when the lock ends cleanly — released by Release, Close or a failed
// acquisition, not lost or abandoned — which alone may delete the marker.
// Guarded by Lock.mu, but for d, which never changes. The marker is not
// among the lock's other keys: an unclean end must leave it.
type delayHold struct {
	plain
	d      time.Duration
	marker string
	clean  bool
}

// wait waits for l's turn as a plain lock's, then holds the marker.
func (h *delayHold) wait(ctx context.Context, l *Lock, q queued) error {
	if err := h.plain.wait(ctx, l, q); err != nil {
		return err
	}
	return h.holdMarker(ctx, l)
}

func (h *delayHold) end(clean bool) []*watchmux.Watch {
	h.clean = clean
	return nil
}

// deleteOps deletes the marker after a clean end, only if it still holds
// the record its own acquisition wrote and only while the lock's key
// still exists with its create revision: a key already gone (deleted by
// someone else, or expired) was an unclean end, whose marker must stay for
// the next holder. A transaction must run it before it deletes the key.
func (h *delayHold) deleteOps(l *Lock) []clientv3.Op {
	if h.marker == "" || !h.clean {
		return nil
	}
	return []clientv3.Op{clientv3.OpTxn([]clientv3.Cmp{
		clientv3.Compare(clientv3.Value(h.marker), "=", l.value),
		clientv3.Compare(clientv3.CreateRevision(l.key), "=", l.rev),
	}, []clientv3.Op{clientv3.OpDelete(h.marker)}, nil)}
}

// closeOps is deleteOps: Close deletes a clean end's marker before the
// revoke takes the key, which the marker's delete compares.
func (h *delayHold) closeOps(l *Lock) []clientv3.Op { return h.deleteOps(l) }

// holdMarker is the lock-delay step of an acquisition whose contender key
// l wrote and that is now eligible: it writes l's marker, reads the
// others, waits the delay if there are any, and deletes them. h is l's
// kind.
func (h *delayHold) holdMarker(ctx context.Context, l *Lock) error {
	s := l.s
	keys := l.keys()
	mpfx := keys.Markers()
	// One marker per acquisition: a later acquisition of the name on this
	// session never overwrites an earlier one's (the evidence of its
	// unclean end), and its clean-up deletes only its own.
	marker := keys.Marker(int64(s.keeper.id), l.rev)
	l.mu.Lock()
	h.marker = marker // for the clean-up, should the reply be lost
	l.mu.Unlock()
	// Sent again while a member holds it (retried): a repeat puts the
	// same record again, and reads its own marker, which it skips; one
	// that lands after l's key is gone writes nothing.
	resp, err := retried(ctx, s.client, nil, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(l.key), "=", l.rev)).
			Then(clientv3.OpGet(mpfx, clientv3.WithPrefix()), clientv3.OpPut(marker, l.value)).
			Commit()
	})
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return ErrKeyDeleted
	}
	var found []*mvccpb.KeyValue // the other markers: the unclean ends
	delay, newest := h.d, int64(0)
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		if string(kv.Key) == marker {
			continue // a retry of the holdMarker request that landed
		}
		found = append(found, kv)
		if r, ok := keyspace.Decode(kv.Value); ok {
			delay = max(delay, r.LockDelay)
		}
		newest = max(newest, kv.ModRevision)
	}
	if len(found) == 0 {
		return nil
	}
	s.log.Info("the previous holder ended without releasing: waiting out the lock-delay",
		zap.String("name", l.name), zap.Duration("lock-delay", delay), zap.Int("markers", len(found)))
	l.waits()
	if owed, err := l.waitDelay(ctx, found, newest, delay); err != nil || !owed {
		return err
	}
	// The compare spares a marker rewritten since the read.
	deletes := make([]clientv3.Op, 0, len(found)+1)
	for _, kv := range found {
		deletes = append(deletes, clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)},
			[]clientv3.Op{clientv3.OpDelete(string(kv.Key))}, nil))
	}
	// The delay records go last: while any marker of the end is left, its
	// record says that the delay has passed. All of them: a record of an
	// earlier delay for these markers, started by a contender lost while
	// it waited (its own marker, newer, made this delay a new one), is
	// done with too. A record of a later end cannot exist: only the
	// eligible contender, l, writes markers.
	// Each chunk only while l's key exists, so that a try a member held
	// and applies late deletes no later end's records.
	ops := append(deletes, clientv3.OpDelete(keys.DelayRecords(), clientv3.WithPrefix()))
	for len(ops) > 0 {
		n := min(len(ops), maxTxnOps)
		chunk := ops[:n]
		resp, err := retried(ctx, s.client, nil, func(ctx context.Context) (*clientv3.TxnResponse, error) {
			return s.client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(l.key), "=", l.rev)).Then(chunk...).Commit()
		})
		if err != nil {
			return err
		}
		if !resp.Succeeded {
			return ErrKeyDeleted
		}
		ops = ops[n:]
	}
	return nil
}

// waitDelay waits out the lock-delay d of l's name after the unclean end
// whose markers l found (the newest has revision rev): until the timer,
// written by the first contender that found the end, expires. The clock
// is etcd's, and it starts once: a contender that gives up during the
// wait (its ctx ended) and the next one to try wait for the same timer,
// not for a new delay each, and one that comes after the timer expired
// does not wait again. It reports whether the delay was owed, and so
// waited out: not when every marker found is gone and neither timer nor
// record is left — another contender waited this end's delay out and
// deleted them after l read them (its delete, sent before its own key's,
// may land after it, as a reply lost and retried does), so that no delay
// is started again and the caller has nothing to delete. Only a
// contender that waited the delay deletes markers of an end: their
// holders' clean-up deletes a marker only while its key exists, and every
// key older than l's is gone.
func (l *Lock) waitDelay(ctx context.Context, found []*mvccpb.KeyValue, rev int64, d time.Duration) (bool, error) {
	s := l.s
	keys := l.keys()
	timer, started := keys.Delay(rev, lease.Seconds(d))
	for {
		// The timer may be gone already: read, then watch from the read.
		get, err := retried(ctx, s.client, nil, func(ctx context.Context) (*clientv3.TxnResponse, error) {
			return s.client.Txn(ctx).Then(
				clientv3.OpGet(timer),
				clientv3.OpGet(started, clientv3.WithCountOnly()),
				clientv3.OpGet(keys.Markers(), clientv3.WithPrefix(), clientv3.WithKeysOnly()),
			).Commit()
		})
		if err != nil {
			return false, err
		}
		switch {
		case len(get.Responses[0].GetResponseRange().Kvs) > 0:
			kv := get.Responses[0].GetResponseRange().Kvs[0]
			if err := l.waitGone(ctx, timer, get.Header.Revision+1, kv.CreateRevision); err != nil {
				return false, err
			}
		case get.Responses[1].GetResponseRange().Count > 0:
			return true, nil // started, and expired since
		case !anyLeft(found, get.Responses[2].GetResponseRange().Kvs):
			return false, nil // waited out and cleared by another contender
		default:
			if err := l.startDelay(ctx, timer, started, d); err != nil {
				return false, err
			}
		}
	}
}

// anyLeft reports whether any of the markers found is still among kvs,
// unchanged.
func anyLeft(found, kvs []*mvccpb.KeyValue) bool {
	for _, kv := range kvs {
		for _, m := range found {
			if string(kv.Key) == string(m.Key) && kv.ModRevision == m.ModRevision {
				return true
			}
		}
	}
	return false
}

// waitGone waits until key, which exists with create revision createRev,
// is deleted at revision rev or later. It watches on the session's watch
// stream (watchmux.Mux.WaitKey, probed as a waiter's), which re-creates
// the watch after a broken stream and re-reads the key after a
// compaction: it returns only once the key is gone (or re-created), l or
// ctx ended, or etcd refused the watch (ErrWatchRefused).
func (l *Lock) waitGone(ctx context.Context, key string, rev, createRev int64) error {
	s := l.s
	return l.awaitWatch(ctx, func(fire func(error)) *watchmux.Watch {
		return s.mux.WaitKey(key, rev, createRev, fire)
	})
}

// startDelay writes the timer, with a lease of d, and its started record,
// unless another contender started them first. Both requests are sent
// again while a member holds them (retried): a grant whose reply was lost
// leaves a lease without keys, which expires; a repeated put finds the
// record, and the timer on its own lease, and writes nothing.
func (l *Lock) startDelay(ctx context.Context, timer, started string, d time.Duration) error {
	s := l.s
	var g *clientv3.LeaseGrantResponse
	var put *clientv3.TxnResponse
	for {
		// etcd counts in whole seconds and raises a TTL below its
		// minimum: the delay is never shorter than asked.
		var err error
		g, err = retried(ctx, s.client, nil, func(ctx context.Context) (*clientv3.LeaseGrantResponse, error) {
			return s.client.Grant(ctx, lease.Seconds(d))
		})
		if err != nil {
			return err
		}
		put, err = retried(ctx, s.client, nil, func(ctx context.Context) (*clientv3.TxnResponse, error) {
			return s.client.Txn(ctx).
				If(clientv3.Compare(clientv3.CreateRevision(started), "=", 0)).
				Then(clientv3.OpPut(timer, l.value, clientv3.WithLease(g.ID)), clientv3.OpPut(started, l.value)).
				Else(clientv3.OpGet(timer)).
				Commit()
		})
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			// The timer's lease (not the session's: the put names no
			// other) expired before the put landed — a slow machine, a
			// try a sick member held — and nothing was written. A new
			// timer: the delay runs longer, never shorter. Not returned
			// as is: the acquisition would take it for the session's
			// lease gone.
			if cerr := ctx.Err(); cerr != nil {
				return fmt.Errorf("lock: lock-delay timer expired before it was written: %w", cerr)
			}
			continue
		}
		if err == nil {
			break
		}
		// The put may have landed: the lease must run its course, or the
		// timer would end early.
		return err
	}
	if !put.Succeeded && !timerOn(put, g.ID) { // another contender started the delay meanwhile
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.cleanupTimeout)
		_, _ = s.client.Revoke(rctx, g.ID)
		cancel()
	}
	return nil
}

// timerOn reports whether put, startDelay's transaction that did not
// write, found the timer on lease id: an earlier try of the same put
// landed, and the lease is the timer's.
func timerOn(put *clientv3.TxnResponse, id clientv3.LeaseID) bool {
	kvs := put.Responses[0].GetResponseRange().Kvs
	return len(kvs) > 0 && clientv3.LeaseID(kvs[0].Lease) == id
}
