package lock

import (
	"context"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// waitRank waits until fewer than l's limit keys under pfx are older than
// l's; older lists them as of the acquiring transaction, which read the
// slot keys too (slots, Header set). It returns the latest listings of
// the older keys and of the slot keys, read together, with the count that
// made l eligible.
//
// A waiter watches the name's keys from the revision etcd creates the
// watch at (a watch from a past revision may wait up to 100 ms for etcd to
// catch it up), then reads the count, and from then on counts deletions of
// older keys from the watch's events: a release costs a waiter one event
// and no read. When the events say l is eligible, one read confirms it.
// A watch that etcd cancels (compaction, lost leader) is created anew and
// the count read again.
func (s *Session) waitRank(ctx context.Context, l *Lock, pfx string, older []*mvccpb.KeyValue, slots *etcdserverpb.RangeResponse) ([]*mvccpb.KeyValue, *etcdserverpb.RangeResponse, error) {
	w := &rankWait{s: s, l: l, pfx: pfx, limit: int64(l.opts.limit), older: int64(len(older)), olderKeys: older, slots: slots}
	defer w.unwatch()
	for w.older >= w.limit {
		step := w.next
		if w.wch == nil {
			step = w.watch
		}
		if err := step(ctx); err != nil {
			return nil, nil, err
		}
	}
	return w.olderKeys, w.slots, nil
}

// rankWait is one semaphore waiter's wait for its rank (waitRank).
type rankWait struct {
	s     *Session
	l     *Lock
	pfx   string // the name's contenders prefix
	limit int64

	older     int64 // keys older than l's, as of counted
	counted   int64 // the revision of the count: events up to it are in it
	olderKeys []*mvccpb.KeyValue
	slots     *etcdserverpb.RangeResponse // read with olderKeys

	wch    clientv3.WatchChan // nil: no watch, create one
	cancel context.CancelFunc // ends wch
}

// watch creates the watch of the name's keys, waits until etcd created it,
// and reads the count again.
func (w *rankWait) watch(ctx context.Context) error {
	w.unwatch()
	wctx, cancel := context.WithCancel(ctx)
	w.cancel = cancel
	w.wch = w.s.client.Watch(clientv3.WithRequireLeader(wctx), w.pfx, clientv3.WithPrefix(),
		clientv3.WithFilterPut(), clientv3.WithPrevKV(), clientv3.WithCreatedNotify())
	wr, ok, err := w.recv(ctx)
	if err != nil {
		return err
	}
	if broken(wr, ok) {
		return w.rewatch(ctx)
	}
	return w.read(ctx)
}

// next takes the watch's next response: it counts the deletions of older
// keys, and when they make l eligible, reads to confirm it.
func (w *rankWait) next(ctx context.Context) error {
	wr, ok, err := w.recv(ctx)
	if err != nil {
		return err
	}
	if broken(wr, ok) {
		return w.rewatch(ctx)
	}
	mine := int64(w.l.token)
	for _, ev := range wr.Events {
		if ev.Kv.ModRevision <= w.counted {
			continue // in the count already
		}
		if string(ev.Kv.Key) == w.l.key {
			return ErrKeyDeleted
		}
		// Without PrevKv the key cannot be told apart; the read that
		// confirms eligibility corrects the count.
		if ev.PrevKv == nil || ev.PrevKv.CreateRevision < mine {
			w.older--
		}
	}
	if w.older < w.limit {
		return w.read(ctx)
	}
	return nil
}

// recv waits for the watch's next response; ok is false once the watch
// channel is closed.
func (w *rankWait) recv(ctx context.Context) (wr clientv3.WatchResponse, ok bool, err error) {
	select {
	case wr, ok = <-w.wch:
		return wr, ok, nil
	case <-w.l.ctx.Done():
		return wr, false, context.Cause(w.l.ctx)
	case <-ctx.Done():
		return wr, false, ctx.Err()
	}
}

// broken reports whether a watch response (ok false: the channel closed)
// says etcd ended the watch.
func broken(wr clientv3.WatchResponse, ok bool) bool {
	return !ok || wr.Canceled || wr.Err() != nil
}

// rewatch drops a watch etcd ended (no leader, compaction) and paces the
// next, so that an unavailable etcd is not asked in a tight loop.
func (w *rankWait) rewatch(ctx context.Context) error {
	w.unwatch()
	return w.l.pause(ctx, 100*time.Millisecond)
}

// unwatch ends the watch, if there is one.
func (w *rankWait) unwatch() {
	if w.cancel != nil {
		w.cancel()
	}
	w.wch, w.cancel = nil, nil
}

// read counts the keys older than l's and lists them and the slot keys
// (readRank).
func (w *rankWait) read(ctx context.Context) error {
	older, slots, err := w.s.readRank(ctx, w.l, w.pfx)
	if err != nil {
		return err
	}
	w.older, w.counted, w.olderKeys, w.slots = int64(len(older)), slots.Header.Revision, older, slots
	return nil
}

// readRank lists the keys under pfx older than l's, a semaphore's
// contender key, and the slot keys (Header set), in one read, and checks
// that l's key is still there.
func (s *Session) readRank(ctx context.Context, l *Lock, pfx string) ([]*mvccpb.KeyValue, *etcdserverpb.RangeResponse, error) {
	mine := int64(l.token) // the contender key's: no slot is held yet
	resp, err := s.waitRead(ctx, l,
		clientv3.OpGet(l.key, clientv3.WithKeysOnly()),
		// Not count-only: etcd counts before it applies the create
		// revision filter.
		clientv3.OpGet(pfx, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithMaxCreateRev(mine-1)),
		slotsOp(s.cfg.prefix, l.name),
	)
	if err != nil {
		return nil, nil, err
	}
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 0 || kvs[0].CreateRevision != mine {
		return nil, nil, ErrKeyDeleted
	}
	slots := resp.Responses[2].GetResponseRange()
	slots.Header = resp.Header
	return resp.Responses[1].GetResponseRange().Kvs, slots, nil
}
