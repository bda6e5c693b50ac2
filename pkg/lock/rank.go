package lock

import (
	"context"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/pkg/internal/watchmux"
)

// waitRank waits until fewer than h's limit contender keys of l's name
// are older than l's, a semaphore's contender key; older lists them as of the
// acquiring transaction, which read the slot keys too (slots, Header
// set). It returns the latest listings of the older keys and of the slot
// keys, read together, with the count that made l eligible. It counts
// the older keys' deletions from one range watch, and reads only when
// the watch is created or breaks and once l is eligible: see "Semaphore"
// in DESIGN.md.
func (h *slotHold) waitRank(ctx context.Context, l *Lock, older []*mvccpb.KeyValue, slots *etcdserverpb.RangeResponse) ([]*mvccpb.KeyValue, *etcdserverpb.RangeResponse, error) {
	s := l.s
	w := &rankWait{s: s, l: l, limit: int64(h.limit), older: int64(len(older)), olderKeys: older, slots: slots}
	defer w.unwatch()
	if w.older >= w.limit {
		l.waits()
	}
	for w.older >= w.limit {
		if w.feed == nil {
			pfx := l.keys().Contenders()
			w.feed = s.mux.Feed(watchmux.Range{Key: pfx, End: clientv3.GetPrefixRangeEnd(pfx), PrevKV: true})
		}
		if err := w.next(ctx); err != nil {
			return nil, nil, err
		}
	}
	return w.olderKeys, w.slots, nil
}

// rankWait is one semaphore waiter's wait for its rank (waitRank).
type rankWait struct {
	s     *Session
	l     *Lock
	limit int64

	older     int64 // keys older than l's, as of counted
	counted   int64 // the revision of the count: events up to it are in it; 0 before the first read
	olderKeys []*mvccpb.KeyValue
	slots     *etcdserverpb.RangeResponse // read with olderKeys

	feed *watchmux.Feed // nil: no watch, create one
}

// next takes the watch's next update: once etcd created the watch it
// reads the count; it counts the deletions of older keys, and when they
// make l eligible, reads to confirm it.
func (w *rankWait) next(ctx context.Context) error {
	u, err := w.recv(ctx)
	if err != nil {
		return err
	}
	if u.Created {
		if err := w.read(ctx); err != nil {
			return err
		}
	}
	mine := w.l.rev
	for _, ev := range u.Events {
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
	switch {
	case u.Err != nil:
		return refused(u.Err)
	case u.Ended:
		w.unwatch() // the next is created at once; the stream paces itself
	case len(u.Events) == 0:
		return nil
	}
	if w.older < w.limit {
		return w.read(ctx)
	}
	return nil
}

// recv waits for the watch's next update.
func (w *rankWait) recv(ctx context.Context) (watchmux.Update, error) {
	for {
		if u, ok := w.feed.Take(); ok {
			return u, nil
		}
		select {
		case <-w.feed.Ready():
		case <-w.l.ctx.Done():
			return watchmux.Update{}, context.Cause(w.l.ctx)
		case <-ctx.Done():
			return watchmux.Update{}, ctx.Err()
		}
	}
}

// unwatch ends the watch, if there is one.
func (w *rankWait) unwatch() {
	if w.feed != nil {
		w.feed.Close()
	}
	w.feed = nil
}

// read counts the keys older than l's and lists them and the slot keys
// (readRank).
func (w *rankWait) read(ctx context.Context) error {
	older, slots, err := w.l.readRank(ctx)
	if err != nil {
		return err
	}
	w.older, w.counted, w.olderKeys, w.slots = int64(len(older)), slots.Header.Revision, older, slots
	return nil
}

// readRank lists the contender keys of l's name older than l's, a semaphore's
// contender key, and the slot keys (Header set), in one read, and checks
// that l's key is still there.
func (l *Lock) readRank(ctx context.Context) ([]*mvccpb.KeyValue, *etcdserverpb.RangeResponse, error) {
	s := l.s
	mine := l.rev
	resp, err := l.waitRead(ctx, clientv3.OpGet(l.key, clientv3.WithKeysOnly()), // Not count-only: etcd counts before it applies the create
		// revision filter.
		clientv3.OpGet(l.keys().Contenders(), clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithMaxCreateRev(mine-1)), slotsOp(s.cfg.prefix, l.name))
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
