package watchmux

import (
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.uber.org/zap"
)

// RefusedError is what a watch's callback gets when etcd refused to create
// its watch, or to re-read its key, for a reason no retry changes: the
// stream's user may not read the key. It wraps rpctypes.ErrPermissionDenied.
type RefusedError struct {
	Key    string
	Reason string // etcd's cancel reason, or the read's error
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("etcd refused to watch %q: %s", e.Key, e.Reason)
}

// Unwrap returns rpctypes.ErrPermissionDenied.
func (e *RefusedError) Unwrap() error { return rpctypes.ErrPermissionDenied }

// permissionDenied is the cancel reason etcd gives when the stream's user
// may not read the key (see isWatchPermitted in etcd's v3rpc/watch.go).
// Other refusals (an invalid or outdated auth token, a duplicate watch ID)
// are the stream's own: a new stream may succeed.
var permissionDenied = rpctypes.ErrGRPCPermissionDenied.Error()

// receive reads responses until the stream fails.
func (m *Mux) receive(ws pb.Watch_WatchClient) error {
	for {
		resp, err := ws.Recv()
		if err != nil {
			return err
		}
		if callback := m.handle(resp); callback != nil {
			callback()
		}
	}
}

// handle applies one response and returns the callback to run, if any.
// It wakes Run only when the response left it something to do.
func (m *Mux) handle(resp *pb.WatchResponse) func() {
	m.mu.Lock()
	m.heard, m.msgs = m.clk.Now(), m.msgs+1
	probed := m.probing
	m.probing = false
	defer func() {
		wake := probed || len(m.cancels) > 0 || len(m.reread) > 0 || m.reset != nil
		m.mu.Unlock()
		if wake {
			m.poke()
		}
	}()
	switch {
	case resp.Created:
		return m.handleCreated(resp)
	case resp.Canceled || resp.CompactRevision != 0:
		return m.handleEnded(resp)
	}
	return m.handleEvents(resp)
}

// handleCreated applies a creation reply. m.mu must be held.
func (m *Mux) handleCreated(resp *pb.WatchResponse) func() {
	// Creation replies come in the order of the requests; a refused one
	// carries no ID (-1), so the order says which watch it was.
	if len(m.pending) == 0 {
		m.log.Error("unexpected watch creation reply", zap.Int64("watch-id", resp.WatchId))
		m.reset = fmt.Errorf("unexpected creation reply for watch %d", resp.WatchId)
		return nil
	}
	id := m.pending[0]
	m.pending = m.pending[1:]
	w := m.watches[id]
	if w != nil && w.state != stateSent {
		w = nil // re-created since; cannot happen on one stream
	}
	switch {
	case !resp.Canceled && resp.WatchId == id:
		m.works = true
		if w != nil && w.created != nil {
			return w.created
		}
		return nil
	case resp.Canceled && resp.CancelReason == permissionDenied:
		return m.refuse(w, resp.CancelReason)
	}
	m.log.Debug("watch creation refused; replacing the stream", zap.Int64("watch-id", id), zap.Int64("reply-id", resp.WatchId), zap.String("reason", resp.CancelReason))
	// The cause may be the stream's own credentials (an expired token): a
	// new stream gets fresh ones.
	if resp.Canceled {
		m.reset = fmt.Errorf("watch creation refused: %s", resp.CancelReason)
	} else {
		m.reset = fmt.Errorf("watch %d created with ID %d", id, resp.WatchId)
	}
	if w != nil {
		return m.broken(w)
	}
	return nil
}

// refuse ends w, if it is still waiting for its creation, because etcd
// refused it for permission. m.mu must be held.
func (m *Mux) refuse(w *Watch, reason string) func() {
	if w == nil {
		return nil
	}
	m.log.Warn("etcd refused to watch a key", zap.String("key", w.key), zap.String("reason", reason))
	m.forget(w)
	w.state = stateDone
	fire, err := w.fire, &RefusedError{Key: w.key, Reason: reason}
	return func() { fire(err) }
}

// handleEnded applies the end of a watch by etcd: a compacted start
// revision, or a cancel of its own. The watch keeps its ID until the
// client cancels it. m.mu must be held.
func (m *Mux) handleEnded(resp *pb.WatchResponse) func() {
	w := m.watches[resp.WatchId]
	if w == nil || w.state != stateSent {
		return nil // the reply to a cancel of ours
	}
	m.log.Debug("watch ended by etcd", zap.String("key", w.key), zap.Int64("compact-revision", resp.CompactRevision), zap.String("reason", resp.CancelReason))
	m.cancels = append(m.cancels, w.id)
	return m.broken(w)
}

// handleEvents applies a watch's events: they go to its events callback,
// or the first reported one (a deletion, or a put where puts are watched)
// fires it. m.mu must be held.
func (m *Mux) handleEvents(resp *pb.WatchResponse) func() {
	w := m.watches[resp.WatchId]
	if w == nil || w.state != stateSent || len(resp.Events) == 0 {
		return nil // progress, or the events of a watch removed meanwhile
	}
	if w.events != nil {
		events, evs := w.events, resp.Events
		return func() { events(evs) }
	}
	for _, ev := range resp.Events {
		if ev.Type == mvccpb.DELETE || w.puts {
			m.drop(w)
			fire := w.fire
			var err error
			if ev.Type == mvccpb.PUT && w.createRev > 0 {
				err = ErrModified // WatchHeld
			}
			return func() { fire(err) }
		}
	}
	return nil
}

// broken handles a watch the server ended without reporting a delete: a
// WatchFromNow watch fires (its owner re-reads), a WatchKey watch waits for
// a re-read. m.mu must be held.
func (m *Mux) broken(w *Watch) func() {
	if w.createRev == 0 {
		m.forget(w)
		w.state = stateDone
		fire := w.fire
		return func() { fire(nil) }
	}
	w.state = stateReread
	m.reread = append(m.reread, w)
	return nil
}
