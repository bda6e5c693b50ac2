package watchmux

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.uber.org/zap"
)

func (m *Mux) rereading() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.reread) > 0
}

// reading is one re-read in flight: up to MaxReadKeys watches' keys, read
// in one ReadFunc call on a goroutine that serve waits for.
type reading struct {
	watches  []*Watch
	done     chan readResult
	cancel   context.CancelFunc
	deadline time.Time
}

type readResult struct {
	rev  int64
	revs []Revs
	err  error
}

// startRead starts re-reading the keys of the first MaxReadKeys watches
// waiting for it, if any.
func (m *Mux) startRead(ctx context.Context, now time.Time) *reading {
	m.mu.Lock()
	n := min(len(m.reread), MaxReadKeys)
	if n == 0 {
		m.mu.Unlock()
		return nil
	}
	if m.reread[0].alone {
		n = 1
	}
	rd := &reading{watches: make([]*Watch, n), done: make(chan readResult, 1), deadline: now.Add(readTimeout)}
	copy(rd.watches, m.reread)
	m.reread = slices.Delete(m.reread, 0, n)
	keys := make([]string, n)
	for i, w := range rd.watches {
		w.state = stateReading
		keys[i] = w.key
	}
	m.mu.Unlock()
	rctx, cancel := context.WithCancel(ctx)
	rd.cancel = cancel
	go func() {
		defer cancel()
		rev, revs, err := m.read(rctx, keys)
		if err == nil && len(revs) != len(keys) {
			err = fmt.Errorf("read %d keys, got the revisions of %d", len(keys), len(revs))
		}
		rd.done <- readResult{rev, revs, err}
	}()
	return rd
}

// finishRead applies a re-read's result: a key still there with the same
// create revision means no delete was missed, and its watch is created
// again from after the read; a key gone or re-created fires, and so does,
// with ErrModified, a WatchHeld key written again. A refused
// read is split into reads of one key each, and a refused one-key read
// fires its watch with a *RefusedError. After another failure the watches
// wait for the next re-read. It reports false for that failure.
func (m *Mux) finishRead(rd *reading, res readResult) bool {
	refused := errors.Is(res.err, rpctypes.ErrPermissionDenied)
	var fire []func()
	m.mu.Lock()
	var back []*Watch // to re-read next
	for i, w := range rd.watches {
		switch {
		case m.watches[w.id] != w:
			// removed, or fired by a delete event, meanwhile
		case refused && len(rd.watches) == 1:
			m.forget(w)
			w.state = stateDone
			f, err := w.fire, &RefusedError{Key: w.key, Reason: res.err.Error()}
			fire = append(fire, func() { f(err) })
		case res.err != nil:
			w.state, w.alone = stateReread, refused
			back = append(back, w)
		case res.revs[i].Create != w.createRev:
			m.forget(w)
			w.state = stateDone
			fire = append(fire, func() { w.fire(nil) })
		case w.puts && res.revs[i].Mod != w.createRev:
			m.forget(w)
			w.state = stateDone
			fire = append(fire, func() { w.fire(ErrModified) })
		default:
			w.rev, w.state, w.alone = res.rev+1, stateQueued, false
			m.queue = append(m.queue, w)
		}
	}
	m.reread = append(back, m.reread...)
	m.mu.Unlock()
	if res.err != nil {
		m.log.Debug("re-reading watched keys failed", zap.Int("keys", len(rd.watches)), zap.Error(res.err))
	}
	for _, f := range fire {
		f()
	}
	return res.err == nil || refused
}
