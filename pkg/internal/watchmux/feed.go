package watchmux

import (
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Feed is a WatchRange watch whose updates its owner takes on its own
// goroutine, in order: the Mux's callbacks must not block, so the Feed
// keeps what they report until the owner takes it.
type Feed struct {
	m     *Mux
	w     *Watch
	ready chan struct{} // capacity 1: an update to take

	mu sync.Mutex
	up Update // not yet taken
}

// Update is what a Feed reported since it was last taken. A watch is
// created before it delivers events, and delivers none after it ended.
type Update struct {
	Created bool            // etcd created the watch
	Events  []*mvccpb.Event // in revision order
	// Ended says the watch broke (Err nil: read again and watch anew) or
	// was refused (Err a *RefusedError). Nothing follows.
	Ended bool
	Err   error
}

// Feed starts a WatchRange watch of r whose updates the caller takes with
// Take when Ready says there are some. Close it when done.
func (m *Mux) Feed(r Range) *Feed {
	f := &Feed{m: m, ready: make(chan struct{}, 1)}
	f.w = m.WatchRange(r, f.events, f.ended, f.created)
	return f
}

// Ready is signaled when there is an update to take. One signal may stand
// for several updates, and an update may be taken before its signal is
// received: Take says whether there was one.
func (f *Feed) Ready() <-chan struct{} { return f.ready }

// Take returns the updates reported since the last Take, merged, and
// whether there were any.
func (f *Feed) Take() (Update, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	u := f.up
	f.up = Update{}
	return u, u.Created || u.Ended || len(u.Events) > 0
}

// Close removes the watch. It is idempotent.
func (f *Feed) Close() { f.m.Remove(f.w) }

func (f *Feed) created() { f.update(func(u *Update) { u.Created = true }) }

func (f *Feed) events(evs []*mvccpb.Event) {
	f.update(func(u *Update) { u.Events = append(u.Events, evs...) })
}

func (f *Feed) ended(err error) { f.update(func(u *Update) { u.Ended, u.Err = true, err }) }

func (f *Feed) update(apply func(*Update)) {
	f.mu.Lock()
	apply(&f.up)
	f.mu.Unlock()
	select {
	case f.ready <- struct{}{}:
	default:
	}
}
