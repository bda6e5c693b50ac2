package watchmux

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/pkg/clock"
)

// OpenFunc opens a new watch stream; the stream ends when ctx ends. ctx
// carries the metadata of clientv3.WithRequireLeader, which the opener
// must pass on to the gRPC call.
type OpenFunc func(ctx context.Context) (pb.Watch_WatchClient, error)

// ReadFunc reads at most MaxReadKeys keys at one revision, linearizably. It
// returns that revision and each key's revisions, zero for a key that does
// not exist, in the order of keys. It must return once ctx ends. An error
// matching rpctypes.ErrPermissionDenied says that the stream's user may not
// read one of the keys.
type ReadFunc func(ctx context.Context, keys []string) (rev int64, revs []Revs, err error)

// Revs are a key's create and mod revisions.
type Revs struct{ Create, Mod int64 }

// ErrModified is what a WatchHeld watch fires with when its key was
// written again.
var ErrModified = errors.New("watchmux: key written again")

// MaxReadKeys is the most keys one ReadFunc call is given: etcd's default
// limit of operations in one transaction (--max-txn-ops).
const MaxReadKeys = 128

// Timing of streams and re-reads, on the Mux's clock.
const (
	// IdleTimeout is how long a stream stays open without watches.
	IdleTimeout = 30 * time.Second
	// minBackoff and maxBackoff bound the wait before reopening a
	// broken stream or retrying a failed re-read; it doubles from
	// minBackoff after every failure, with jitter, and starts again
	// from minBackoff once a stream has created a watch or a read has
	// succeeded.
	minBackoff = 50 * time.Millisecond
	maxBackoff = 2 * time.Second
	// readTimeout bounds one re-read.
	readTimeout = 5 * time.Second
	// ProbeAfter is how long a stream carrying watches may go without a
	// message from etcd before the Mux asks for a progress report;
	// ProbeTimeout is how long it then waits for any message before it
	// replaces the stream as silent. A connection can stop delivering
	// without breaking (a stalled proxy, a half-open TCP connection that
	// the keepalive has not caught): a key deleted meanwhile is noticed by
	// the re-read of the next stream, within about ProbeAfter +
	// ProbeTimeout + a reconnect and a read.
	ProbeAfter   = 5 * time.Second
	ProbeTimeout = 5 * time.Second
	// WaiterProbeAfter and WaiterProbeTimeout replace ProbeAfter and
	// ProbeTimeout while the stream carries a watch that someone waits on
	// to go on (WatchFromNow, WatchRange: a waiter's predecessor, a
	// semaphore's queue; WaitKey: a lock-delay's timer) and the client
	// has more than one endpoint: the next holder of a lock must not wait
	// ten seconds for a stream on a frozen member to be given up. A probe
	// costs etcd a small message a second.
	WaiterProbeAfter   = time.Second
	WaiterProbeTimeout = time.Second
)

// Mux multiplexes key watches over one etcd watch stream, so that a watch
// costs a map entry instead of a clientv3.Watch (a goroutine, channels and
// buffers in the client). It chooses the watch IDs itself (etcd ≥ 3.4), a
// fresh one for every create request, and sends create requests without
// waiting for each reply (clientv3 creates one watch at a time per stream).
//
// Its methods are safe for concurrent use. Run serves the watches; until
// it is called, and after it returns, watches are registered but none is
// created or fires.
type Mux struct {
	open OpenFunc
	read ReadFunc
	clk  clock.Clock
	log  *zap.Logger
	// endpoints is how many endpoints a new stream may go to (nil: more
	// than one); with one, a stream replaced goes to the same member.
	endpoints func() int
	kick      chan struct{} // capacity 1: something to do for Run
	wake      clock.Timer   // Run's timer (see timer); nil until first needed

	// mu guards what follows. It is the last lock taken: pkg/lock takes
	// Session.mu, then Lock.mu, then calls into the Mux; callbacks are
	// never called with mu held.
	mu      sync.Mutex
	nextID  int64
	watches map[int64]*Watch // every live watch, by its current ID
	waiters int              // of watches, those someone waits on to go on (Watch.waited)
	delayed []*Watch         // stateDelayed, in order of due time
	queue   []*Watch         // stateQueued, in order
	reread  []*Watch         // stateReread
	orphans []*Watch         // stateOrphan
	pending []int64          // creates sent on the current stream awaiting their reply, in order
	cancels []int64          // cancel requests to send on the current stream
	reset   error            // why the current stream must be replaced, if it must
	works   bool             // the current stream has created a watch
	heard   time.Time        // when the current stream last delivered a message (or opened)
	msgs    uint64           // messages the current stream delivered
	probing bool             // a progress request awaits an answer: the next message wakes Run
}

// Watch is one registered watch, the handle for Mux.Remove. Its fields
// belong to its Mux.
type Watch struct {
	key       string
	end       string // the range end of a WatchRange; "" for one key
	rev       int64  // watch from this revision on (0: from now); moved on by a re-read
	createRev int64  // WatchKey: the key's create revision; 0 for WatchRange
	puts      bool   // report puts too, not only deletions (WatchRange, WatchHeld)
	prevKV    bool   // events carry the previous version
	due       time.Time
	fire      func(error)
	created   func()
	events    func([]*mvccpb.Event) // nil: the first event fires the watch
	id        int64
	state     state
	alone     bool // re-read on its own: etcd refused to read a batch with it
	waited    bool // someone waits on it to go on (WatchRange, WaitKey)
}

type state int

const (
	stateDelayed state = iota // not yet due (WatchKey's after)
	stateQueued               // to be created on the current or next stream
	stateSent                 // its create request went out on the current stream
	stateOrphan               // was sent on a stream that broke
	stateReread               // its key must be re-read before it is created again
	stateReading              // its key is being re-read
	stateDone                 // fired or removed
)

// New returns a Mux that opens its streams with open, re-reads keys with
// read, measures time with clk and logs to log. None may be nil.
func New(open OpenFunc, read ReadFunc, clk clock.Clock, log *zap.Logger) *Mux {
	return &Mux{open: open, read: read, clk: clk, log: log, kick: make(chan struct{}, 1), watches: make(map[int64]*Watch)}
}

// WatchKey watches key, which exists with create revision createRev (> 0),
// for its deletion at revision rev or later. The watch is created on the stream
// once after has passed (at once if after ≤ 0); a deletion meanwhile is
// reported then, since the watch starts at rev.
//
// fire is called at most once: with nil when the key is deleted or found
// gone or re-created (by a re-read after a broken stream or a compaction),
// or with a *RefusedError when etcd refuses for good to watch or re-read
// the key. It runs on one of the Mux's goroutines and must not block.
func (m *Mux) WatchKey(key string, rev, createRev int64, after time.Duration, fire func(error)) *Watch {
	w := &Watch{key: key, rev: rev, createRev: createRev, fire: fire, state: stateQueued}
	if after > 0 {
		w.state, w.due = stateDelayed, m.clk.Now().Add(after)
	}
	return m.add(w)
}

// WaitKey is WatchKey, at once, for a key someone waits on to go on (a
// lock-delay's timer): while it is watched, the stream is probed as a
// waiter's is (WaiterProbeAfter).
func (m *Mux) WaitKey(key string, rev, createRev int64, fire func(error)) *Watch {
	return m.add(&Watch{key: key, rev: rev, createRev: createRev, fire: fire, state: stateQueued, waited: true})
}

// WatchHeld is WatchKey for a key not written since it was created, which
// also fires, with ErrModified, once the key is written again: a put seen
// by the watch, or a re-read that finds its mod revision moved on.
func (m *Mux) WatchHeld(key string, rev, createRev int64, after time.Duration, fire func(error)) *Watch {
	w := &Watch{key: key, rev: rev, createRev: createRev, puts: true, fire: fire, state: stateQueued}
	if after > 0 {
		w.state, w.due = stateDelayed, m.clk.Now().Add(after)
	}
	return m.add(w)
}

// WatchFromNow watches key for a deletion after the revision etcd creates
// the watch at, and calls created (if not nil) once it has. fire is called
// at most once: with nil on a deletion or when the watch breaks before
// seeing one (the caller reads the key again), or with a *RefusedError
// when etcd refuses for good to watch the key. created is not called after
// fire. Both run on one of the Mux's goroutines and must not block.
//
// A watch from a past revision would be exact without a second read, but
// etcd serves a watch whose start revision is behind the store from its
// "unsynced" group, caught up only every 100 ms (watchResyncPeriod in
// etcd's mvcc).
func (m *Mux) WatchFromNow(key string, fire func(error), created func()) *Watch {
	return m.WatchRange(Range{Key: key}, nil, fire, created)
}

// Range is what a WatchRange watch covers and reports.
type Range struct {
	Key string
	// End is the end of the range [Key, End), as clientv3.GetPrefixRangeEnd
	// gives for a prefix; "" watches Key alone.
	End string
	// Rev is the revision to watch from; 0 is the revision etcd creates
	// the watch at. A past revision compacted meanwhile breaks the watch.
	Rev int64
	// Puts reports puts as well as deletions.
	Puts bool
	// PrevKV has each event carry the key's previous version.
	PrevKV bool
}

// WatchRange watches the keys of r. Without events (nil) it is like
// WatchFromNow for a range: fire is called at most once, with nil on the
// first event or when the watch breaks. With events, each response's
// events are passed to events, and fire is called only when the watch
// breaks (nil: the owner reads again and watches anew) or is refused (a
// *RefusedError); events is not called after fire. created is called (if
// not nil) once etcd has created the watch. All run on one of the Mux's
// goroutines and must not block.
//
// A broken stream breaks every WatchRange watch, once a new stream is
// open: watched again from "now", they would miss what happened meanwhile,
// and a past revision may be compacted by then.
func (m *Mux) WatchRange(r Range, events func([]*mvccpb.Event), fire func(error), created func()) *Watch {
	return m.add(&Watch{key: r.Key, end: r.End, rev: r.Rev, puts: r.Puts, prevKV: r.PrevKV,
		fire: fire, created: created, events: events, state: stateQueued, waited: true})
}

func (m *Mux) add(w *Watch) *Watch {
	m.mu.Lock()
	m.nextID++
	w.id = m.nextID
	m.watches[w.id] = w
	if w.waited {
		m.waiters++
	}
	wake := true // a create to send, or an earlier due time to wake up for
	if w.state == stateDelayed {
		// Insert in due order; with one delay, that is at the end.
		i := len(m.delayed)
		for i > 0 && m.delayed[i-1].due.After(w.due) {
			i--
		}
		m.delayed = slices.Insert(m.delayed, i, w)
		// Behind another delayed watch, w is due no earlier than the time
		// Run already waits for (or an earlier one, if that watch was
		// removed): Run need not wake up now. Under a stream of short
		// holds this spares it a wake-up per acquisition.
		wake = i == 0
	} else {
		m.queue = append(m.queue, w)
	}
	m.mu.Unlock()
	if wake {
		m.poke()
	}
	return w
}

// Remove stops w: after it returns, the Mux holds nothing of w but a cancel
// request to send if etcd has the watch. A callback of w already under
// way may still run. Remove is idempotent, accepts nil, and is a no-op
// after w fired.
func (m *Mux) Remove(w *Watch) {
	if w == nil {
		return
	}
	m.mu.Lock()
	if m.watches[w.id] != w {
		m.mu.Unlock()
		return
	}
	// A sent watch leaves a cancel request to send; a delayed one leaves
	// Run's timer set for its due time, and may have been the last watch,
	// which starts the idle countdown now, not at that time.
	wake := w.state == stateSent || w.state == stateDelayed
	m.drop(w)
	m.mu.Unlock()
	if wake {
		m.poke()
	}
}

// drop forgets w and, if the current stream has its watch, queues a cancel
// request for it. m.mu must be held.
func (m *Mux) drop(w *Watch) {
	m.forget(w)
	switch w.state {
	case stateDelayed:
		m.delayed = without(m.delayed, w)
	case stateQueued:
		m.queue = without(m.queue, w)
	case stateReread:
		m.reread = without(m.reread, w)
	case stateOrphan:
		m.orphans = without(m.orphans, w)
	case stateSent:
		m.cancels = append(m.cancels, w.id)
	}
	w.state = stateDone
}

// forget removes w from the live watches. m.mu must be held.
func (m *Mux) forget(w *Watch) {
	delete(m.watches, w.id)
	if w.waited {
		m.waiters--
	}
}

func without(ws []*Watch, w *Watch) []*Watch {
	if i := slices.Index(ws, w); i >= 0 {
		return slices.Delete(ws, i, i+1) // clears the vacated slot
	}
	return ws
}

func (m *Mux) poke() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}
