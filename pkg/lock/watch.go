package lock

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// keyWatch waits for one key's deletion. It is registered with a session's
// watchMux and fires at most once.
type keyWatch struct {
	id  int64
	key string
	rev int64 // watch from this revision on; moved forward by a re-read
	// createRev is the create revision of the holder's own key, or 0 for a
	// waiter's predecessor. When the server ends a watch without a delete
	// (compaction, refused creation), an own-key watch re-reads its key and
	// fires only if the key is gone or replaced; a predecessor watch fires
	// at once, because its waiter re-reads anyway.
	createRev int64
	due       time.Time // when a watchDelayed watch is to be created
	fire      func()    // called at most once, never under watchMux.mu; must not block
	// created, if set, is called when etcd has created the watch; a
	// watch from "now" sees the deletions after that moment.
	created func()
	state   watchState
}

type watchState int

const (
	watchUnsent  watchState = iota // queued for a create request on the current stream
	watchSent                      // the server has it, or will
	watchReread                    // the server ended it; its key must be re-read
	watchDelayed                   // an own-key watch not yet due (see ownWatchDelay)
)

// ownWatchDelay is how long a held lock's key goes unwatched after the
// acquisition. Most locks are held briefly, and a lock released within the
// delay never costs etcd a watch to create and cancel. Nothing is missed:
// the watch starts at the acquisition's revision, so a deletion during the
// delay is reported once the watch is created and etcd has caught it up
// (its start revision is then in the past: up to another 100 ms, see
// watchFromNow). The lease deadline, not this watch, is what stops a
// holder before etcd can expire its lease.
const ownWatchDelay = 100 * time.Millisecond

// watchMux multiplexes every key watch of one session — each held lock's
// own key, each waiter's predecessor — over a single etcd watch stream, so
// a held lock costs a map entry instead of a clientv3.Watch (a goroutine,
// channels and buffers in the client) plus a goroutine of ours. It chooses
// the watch IDs itself (etcd ≥ 3.4), sends create requests without waiting
// for each reply (clientv3 creates one watch at a time per stream), and
// re-creates every watch from its revision on a new stream after the old
// one breaks, so no delete is missed: a watch from revision r reports every
// deletion at r or later, or says that r was compacted, and then the key is
// re-read.
//
// run owns the stream and sends on it; a second goroutine, started and
// waited for by run, receives. Both end when the session ends.
type watchMux struct {
	s    *Session
	kick chan struct{} // capacity 1: something to send

	mu      sync.Mutex
	nextID  int64
	watches map[int64]*keyWatch
	queue   []*keyWatch // watchUnsent watches (entries removed meanwhile are skipped)
	delayed []*keyWatch // watchDelayed watches, in the order they become due
	pending []int64     // creates sent on the current stream, awaiting their reply, in order
	cancels []int64     // cancel requests to send on the current stream
	reread  []*keyWatch // watchReread watches
	reset   bool        // the stream must be replaced (a creation was refused)
}

func newWatchMux(s *Session) *watchMux {
	return &watchMux{s: s, kick: make(chan struct{}, 1), watches: make(map[int64]*keyWatch)}
}

// watchOwn watches the holder's own key, created at createRev, for
// deletions from revision rev on, and calls fire once when it sees one.
// The watch is created ownWatchDelay later; it survives broken streams and
// compactions (see keyWatch.createRev).
func (m *watchMux) watchOwn(key string, rev, createRev int64, fire func()) *keyWatch {
	return m.add(&keyWatch{key: key, rev: rev, createRev: createRev, fire: fire,
		state: watchDelayed, due: time.Now().Add(ownWatchDelay)})
}

// watchFromNow watches a waiter's predecessor for deletions after etcd
// creates the watch, and then calls created. fire is called once, on a
// deletion or when the watch breaks.
//
// A watch from a past revision would be exact without a second read, but
// etcd serves a watch whose start revision is already behind the store
// from its "unsynced" group, caught up only every 100 ms
// (watchResyncPeriod in etcd's mvcc), which under load delayed most
// handoffs. The waiter instead reads the key again, linearizably, once
// created was called.
func (m *watchMux) watchFromNow(key string, fire func(), created func()) *keyWatch {
	return m.add(&keyWatch{key: key, fire: fire, created: created})
}

func (m *watchMux) add(w *keyWatch) *keyWatch {
	m.mu.Lock()
	m.nextID++
	w.id = m.nextID
	m.watches[w.id] = w // the ID changes with every create request
	if w.state == watchDelayed {
		m.delayed = append(m.delayed, w)
	} else {
		m.queue = append(m.queue, w)
	}
	m.mu.Unlock()
	// Always: the loop may be idle, without a stream, even with delayed
	// watches queued (removed ones, which flush skips).
	m.poke()
	return w
}

// remove stops w. It is idempotent, and a no-op after w fired.
func (m *watchMux) remove(w *keyWatch) {
	if w == nil {
		return
	}
	m.mu.Lock()
	_, ok := m.watches[w.id]
	cancel := ok && w.state == watchSent
	if ok {
		m.drop(w)
	}
	m.mu.Unlock()
	if cancel {
		m.poke() // a cancel request to send
	}
}

// drop forgets w and, if the server has it, asks the server to cancel it.
// m.mu must be held.
func (m *watchMux) drop(w *keyWatch) {
	delete(m.watches, w.id)
	switch w.state {
	case watchSent:
		m.cancels = append(m.cancels, w.id)
	case watchDelayed:
		// Removed at once: flush, which would skip it, runs only while
		// a stream is open.
		if i := slices.Index(m.delayed, w); i >= 0 {
			m.delayed = slices.Delete(m.delayed, i, i+1)
		}
	}
}

func (m *watchMux) poke() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// run keeps a watch stream open while there are watches, until the session
// ends.
func (m *watchMux) run() {
	defer m.s.wg.Done()
	ctx := m.s.alive
	for {
		// Open a stream only when something needs watching.
		for m.idle() {
			select {
			case <-ctx.Done():
				return
			case <-m.kick:
			}
		}
		err := m.stream(ctx)
		if ctx.Err() != nil {
			return
		}
		m.s.log.Debug("watch stream ended; reopening", zap.Error(err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (m *watchMux) idle() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.watches) == 0
}

// stream serves one watch stream until it breaks or ctx ends.
func (m *watchMux) stream(ctx context.Context) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ws, err := pb.NewWatchClient(m.s.client.ActiveConnection()).Watch(sctx, grpc.WaitForReady(true))
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.queue, m.pending, m.cancels, m.reset = m.queue[:0], nil, nil, false
	var fire []func()
	for _, w := range m.watches {
		switch {
		case w.state == watchSent && w.createRev == 0:
			// Re-created from "now", it would miss what happened while
			// no stream was open: its waiter re-reads instead.
			delete(m.watches, w.id)
			fire = append(fire, w.fire)
		case w.state != watchReread && w.state != watchDelayed:
			w.state = watchUnsent // a new stream has none of them
			m.queue = append(m.queue, w)
		}
	}
	m.mu.Unlock()
	for _, f := range fire {
		f()
	}

	recvErr := make(chan error, 1)
	go func() { recvErr <- m.receive(ws) }()
	received := false
	defer func() {
		cancel()
		if !received {
			<-recvErr
		}
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		retry, next, err := m.flush(sctx, ws)
		if err != nil {
			return err
		}
		// Wake up for a failed re-read's retry or the next delayed watch.
		wait := time.Hour
		if retry {
			wait = 50 * time.Millisecond
		}
		if !next.IsZero() {
			wait = min(wait, time.Until(next))
		}
		timer.Reset(wait)
		select {
		case <-m.kick:
		case <-timer.C:
		case err := <-recvErr:
			received = true
			return err
		case <-sctx.Done():
			return sctx.Err()
		}
	}
}

// flush sends what is queued — cancels, then creates, including delayed
// watches now due — and then re-reads the keys of own-key watches the
// server ended. retry reports a re-read that failed and must be tried
// again; next is when the next delayed watch is due (zero if none).
func (m *watchMux) flush(ctx context.Context, ws pb.Watch_WatchClient) (retry bool, next time.Time, err error) {
	m.mu.Lock()
	if m.reset {
		m.mu.Unlock()
		return false, next, errors.New("a watch creation was refused")
	}
	now := time.Now()
	for len(m.delayed) > 0 {
		w := m.delayed[0]
		if m.watches[w.id] == w && w.state == watchDelayed {
			if w.due.After(now) {
				next = w.due
				break
			}
			w.state = watchUnsent
			m.queue = append(m.queue, w)
		}
		m.delayed[0] = nil
		m.delayed = m.delayed[1:]
	}
	reqs := make([]*pb.WatchRequest, 0, len(m.cancels)+len(m.queue))
	for _, id := range m.cancels {
		reqs = append(reqs, &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{
			CancelRequest: &pb.WatchCancelRequest{WatchId: id}}})
	}
	m.cancels = m.cancels[:0]
	for _, w := range m.queue {
		if m.watches[w.id] != w || w.state != watchUnsent {
			continue
		}
		// A fresh ID each time: etcd keeps the ID of a watch it ended
		// for compaction until the client cancels it.
		delete(m.watches, w.id)
		m.nextID++
		w.id, w.state = m.nextID, watchSent
		m.watches[w.id] = w
		m.pending = append(m.pending, w.id)
		reqs = append(reqs, &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{
			CreateRequest: &pb.WatchCreateRequest{
				Key:           []byte(w.key),
				StartRevision: w.rev,
				Filters:       []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NOPUT},
				WatchId:       w.id,
			}}})
	}
	clear(m.queue)
	m.queue = m.queue[:0]
	reread := m.reread
	m.reread = nil
	m.mu.Unlock()

	for _, r := range reqs {
		if err := ws.Send(r); err != nil {
			return false, next, err
		}
	}
	for i, w := range reread {
		if err := m.recheck(ctx, w); err != nil {
			m.s.log.Debug("re-reading a watched key failed", zap.String("key", w.key), zap.Error(err))
			m.mu.Lock()
			m.reread = append(m.reread, reread[i:]...)
			m.mu.Unlock()
			return true, next, nil
		}
	}
	return false, next, nil
}

// recheck re-reads an own-key watch's key after the server ended its watch:
// the key still there with the same create revision means no delete was
// missed, and the watch resumes after the read; otherwise it fires.
func (m *watchMux) recheck(ctx context.Context, w *keyWatch) error {
	resp, err := m.s.client.Get(ctx, w.key)
	if err != nil {
		return err
	}
	gone := len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != w.createRev
	m.mu.Lock()
	if m.watches[w.id] != w {
		m.mu.Unlock()
		return nil // removed meanwhile
	}
	if gone {
		delete(m.watches, w.id)
	} else {
		w.rev = resp.Header.Revision + 1
		w.state = watchUnsent
		m.queue = append(m.queue, w)
	}
	m.mu.Unlock()
	if gone {
		w.fire()
	} else {
		m.poke()
	}
	return nil
}

// receive reads responses until the stream fails.
func (m *watchMux) receive(ws pb.Watch_WatchClient) error {
	for {
		resp, err := ws.Recv()
		if err != nil {
			return err
		}
		if fire := m.handle(resp); fire != nil {
			fire()
		}
	}
}

// handle applies one response and returns the callback to run, if any.
// It wakes the run loop only when the response left it something to do.
func (m *watchMux) handle(resp *pb.WatchResponse) func() {
	m.mu.Lock()
	defer func() {
		wake := len(m.cancels) > 0 || len(m.reread) > 0 || m.reset
		m.mu.Unlock()
		if wake {
			m.poke()
		}
	}()
	switch {
	case resp.Created:
		// Creation replies come in the order of the requests; a refused
		// one carries no ID (-1), so the queue says which watch it was.
		if len(m.pending) == 0 {
			m.s.log.Error("unexpected watch creation reply", zap.Int64("watch-id", resp.WatchId))
			m.reset = true
			return nil
		}
		id := m.pending[0]
		m.pending = m.pending[1:]
		if !resp.Canceled && resp.WatchId == id {
			if w := m.watches[id]; w != nil {
				return w.created // nil unless a watch from "now"
			}
			return nil
		}
		m.s.log.Debug("watch creation refused", zap.Int64("watch-id", id), zap.Int64("reply-id", resp.WatchId), zap.String("reason", resp.CancelReason))
		// The cause may be the stream's own credentials (an expired
		// token): a new stream gets fresh ones.
		m.reset = true
		if w := m.watches[id]; w != nil {
			return m.broken(w)
		}
		return nil
	case resp.Canceled || resp.CompactRevision != 0:
		// Ended by the server (a compacted start revision), or by a cancel
		// of ours for a watch that is gone from the map already.
		if w := m.watches[resp.WatchId]; w != nil {
			m.s.log.Debug("watch ended by etcd", zap.String("key", w.key), zap.Int64("compact-revision", resp.CompactRevision), zap.String("reason", resp.CancelReason))
			return m.broken(w)
		}
		return nil
	}
	for _, ev := range resp.Events {
		if ev.Type != mvccpb.DELETE {
			continue
		}
		if w := m.watches[resp.WatchId]; w != nil {
			m.drop(w)
			return w.fire
		}
	}
	return nil
}

// broken handles a watch the server ended without reporting a delete: a
// predecessor watch fires (its waiter re-reads), an own-key watch waits for
// a re-read. m.mu must be held.
func (m *watchMux) broken(w *keyWatch) func() {
	if w.createRev == 0 {
		delete(m.watches, w.id)
		return w.fire
	}
	w.state = watchReread
	m.reread = append(m.reread, w)
	return nil
}
