package watchmux

import (
	"context"
	"errors"
	"slices"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/pkg/internal/backoff"
)

var (
	errIdle   = errors.New("idle")
	errSilent = errors.New("watch stream silent: no answer to a progress request")
)

// Run serves the watches until ctx ends: it keeps a stream open while
// watches need one, and replaces a stream that breaks. It returns once ctx
// has ended and every goroutine it started has returned; no callback runs
// after that. Run must be called once.
func (m *Mux) Run(ctx context.Context) {
	reconnect := backoff.Backoff{Min: minBackoff, Max: maxBackoff, Jitter: true}
	for m.awaitWork(ctx) {
		err := m.serve(ctx)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errIdle) {
			m.log.Debug("watch stream closed: no watches")
			continue
		}
		if m.worked() {
			reconnect.Reset()
		}
		d := reconnect.Next()
		m.log.Debug("watch stream ended; reopening", zap.Error(err), zap.Duration("after", d))
		if !m.sleep(ctx, d) {
			return
		}
	}
}

// awaitWork waits without a stream until something needs one, and reports
// whether it does (false once ctx has ended).
func (m *Mux) awaitWork(ctx context.Context) bool {
	for {
		now := m.clk.Now()
		m.mu.Lock()
		m.promote(now)
		ready := len(m.queue)+len(m.reread)+len(m.orphans) > 0
		var next time.Time
		if len(m.delayed) > 0 {
			next = m.delayed[0].due
		}
		m.mu.Unlock()
		if ready {
			return true
		}
		tc, stop := m.timer(next)
		select {
		case <-ctx.Done():
			stop()
			return false
		case <-m.kick:
		case <-tc:
		}
		stop()
	}
}

// promote queues the delayed watches due at now. m.mu must be held.
func (m *Mux) promote(now time.Time) {
	n := 0
	for n < len(m.delayed) && !m.delayed[n].due.After(now) {
		w := m.delayed[n]
		w.state = stateQueued
		m.queue = append(m.queue, w)
		n++
	}
	m.delayed = slices.Delete(m.delayed, 0, n)
}

// serve opens a stream and serves it until it breaks, has been idle for
// IdleTimeout (errIdle), or ctx ends.
func (m *Mux) serve(ctx context.Context) error {
	sctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	ws, err := m.open(sctx)
	if err != nil {
		return err
	}
	m.begin()
	recvErr := make(chan error, 1)
	go func() { recvErr <- m.receive(ws) }()
	s := &serving{m: m, ctx: sctx, ws: ws, recvErr: recvErr,
		readRetry: backoff.Backoff{Min: minBackoff, Max: maxBackoff, Jitter: true}}
	defer s.stop(cancel)
	for {
		next, err := s.step(m.clk.Now())
		if err != nil {
			return err
		}
		if err := s.wait(next); err != nil {
			return err
		}
	}
}

// serving is the state of one stream that serve runs.
type serving struct {
	m       *Mux
	ctx     context.Context // the stream's
	ws      pb.Watch_WatchClient
	recvErr chan error // the receiving goroutine's end; nil once received

	rd        *reading // the re-read in flight
	readRetry backoff.Backoff
	readAt    time.Time // no re-read before
	idleSince time.Time // zero: not idle
	probe     probe
}

// step does what is due at now — sends the queued requests, starts a
// re-read, ends an idle or silent stream, times out a re-read — and
// returns when to step again: the next delayed watch, a re-read's timeout
// or retry, the idle timeout or the silence check.
func (s *serving) step(now time.Time) (time.Time, error) {
	m := s.m
	reqs, idle, err := m.take(now)
	if err != nil {
		return time.Time{}, err
	}
	for _, r := range reqs {
		if err := s.ws.Send(r); err != nil {
			return time.Time{}, err
		}
	}
	if s.rd == nil && !now.Before(s.readAt) {
		s.rd = m.startRead(s.ctx, now)
	}
	if err := s.checkIdle(now, idle); err != nil {
		return time.Time{}, err
	}
	due, err := m.checkSilence(s.ws, &s.probe, now, idle)
	if err != nil {
		return time.Time{}, err
	}
	next := earliest(m.nextDue(), due)
	next = earliest(next, s.readDue(now))
	if !s.idleSince.IsZero() {
		next = earliest(next, s.idleSince.Add(IdleTimeout))
	}
	return next, nil
}

// checkIdle fails with errIdle once the stream has had no watch and no
// re-read for IdleTimeout.
func (s *serving) checkIdle(now time.Time, idle bool) error {
	if !idle || s.rd != nil {
		s.idleSince = time.Time{}
		return nil
	}
	if s.idleSince.IsZero() {
		s.idleSince = now
	}
	if !now.Before(s.idleSince.Add(IdleTimeout)) {
		return errIdle
	}
	return nil
}

// readDue is when the re-reads need the next step (zero: no need): the
// deadline of the one in flight, which it cancels once passed, or the
// time of the next try.
func (s *serving) readDue(now time.Time) time.Time {
	switch {
	case s.rd != nil:
		if s.rd.deadline.IsZero() {
			return time.Time{} // canceled already
		}
		if now.Before(s.rd.deadline) {
			return s.rd.deadline
		}
		s.rd.cancel() // its result comes with ctx's error
		s.rd.deadline = time.Time{}
	case s.m.rereading():
		return s.readAt
	}
	return time.Time{}
}

// wait waits until next, a kick, the end of the re-read in flight, or the
// stream's end, which it returns.
func (s *serving) wait(next time.Time) error {
	m := s.m
	var readDone <-chan readResult
	if s.rd != nil {
		readDone = s.rd.done
	}
	tc, stop := m.timer(next)
	defer stop()
	select {
	case <-m.kick:
	case <-tc:
	case res := <-readDone:
		if m.finishRead(s.rd, res) {
			s.readRetry.Reset()
		} else {
			s.readAt = m.clk.Now().Add(s.readRetry.Next())
		}
		s.rd = nil
	case err := <-s.recvErr:
		s.recvErr = nil
		return err
	}
	return nil
}

// stop ends the stream with cancel and waits for its goroutines: the
// receiver, and the re-read in flight.
func (s *serving) stop(cancel context.CancelFunc) {
	cancel()
	if s.recvErr != nil {
		<-s.recvErr
	}
	if s.rd != nil {
		s.m.finishRead(s.rd, <-s.rd.done)
	}
	s.m.end()
}

// probe is the progress request in flight on a stream, if any.
type probe struct {
	sent time.Time // zero: none
	msgs uint64    // messages received before it was sent
}

// checkSilence asks etcd for a progress report on a stream that carries
// watches and has delivered nothing for ProbeAfter, and fails with
// errSilent when nothing at all arrives within ProbeTimeout of the ask
// (WaiterProbeAfter and WaiterProbeTimeout while someone waits on one).
// It returns when it must be called again (zero: no need).
func (m *Mux) checkSilence(ws pb.Watch_WatchClient, p *probe, now time.Time, idle bool) (time.Time, error) {
	multi := m.endpointCount() > 1 // with one, a new stream would go to the same member
	m.mu.Lock()
	heard, msgs := m.heard, m.msgs
	after, timeout := ProbeAfter, ProbeTimeout
	if m.waiters > 0 && multi {
		after, timeout = WaiterProbeAfter, WaiterProbeTimeout
	}
	m.mu.Unlock()
	if !p.sent.IsZero() {
		if msgs == p.msgs {
			if !now.Before(p.sent.Add(timeout)) {
				return time.Time{}, errSilent
			}
			return p.sent.Add(timeout), nil
		}
		*p = probe{} // answered, or anything else arrived
	}
	if idle {
		return time.Time{}, nil
	}
	if now.Before(heard.Add(after)) {
		return heard.Add(after), nil
	}
	m.mu.Lock()
	m.probing = true
	m.mu.Unlock()
	*p = probe{sent: now, msgs: msgs}
	if err := ws.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}}); err != nil {
		return time.Time{}, err
	}
	return now.Add(timeout), nil
}

// begin prepares the state for a new stream: watches of the broken one are
// re-read (WatchKey) or fire (WatchFromNow: re-created from "now", they
// would miss what happened while no stream was open).
func (m *Mux) begin() {
	m.mu.Lock()
	m.pending, m.cancels, m.reset, m.works = nil, nil, nil, false
	m.heard, m.msgs, m.probing = m.clk.Now(), 0, false
	var fire []func(error)
	for _, w := range m.orphans {
		if w.createRev == 0 {
			m.forget(w)
			w.state = stateDone
			fire = append(fire, w.fire)
		} else {
			w.state = stateReread
			m.reread = append(m.reread, w)
		}
	}
	clear(m.orphans)
	m.orphans = m.orphans[:0]
	m.mu.Unlock()
	for _, f := range fire {
		f(nil)
	}
}

// end records that the stream is gone: the watches it carried are orphans
// until the next stream.
func (m *Mux) end() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, w := range m.watches {
		if w.state == stateSent {
			w.state = stateOrphan
			m.orphans = append(m.orphans, w)
		}
	}
	m.pending, m.cancels = nil, nil
}

// worked reports whether the last stream created a watch.
func (m *Mux) worked() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.works
}

// take returns the requests to send now — cancels, then creates, including
// delayed watches now due — and whether the Mux has no watches at all. It
// returns an error if the stream must be replaced.
func (m *Mux) take(now time.Time) (reqs []*pb.WatchRequest, idle bool, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.reset != nil {
		return nil, false, m.reset
	}
	m.promote(now)
	for _, id := range m.cancels {
		reqs = append(reqs, &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{
			CancelRequest: &pb.WatchCancelRequest{WatchId: id}}})
	}
	m.cancels = m.cancels[:0]
	for _, w := range m.queue {
		// A fresh ID each time: etcd keeps the ID of a watch it ended
		// for compaction until the client cancels it.
		delete(m.watches, w.id) // and back under its new ID
		m.nextID++
		w.id, w.state = m.nextID, stateSent
		m.watches[w.id] = w
		m.pending = append(m.pending, w.id)
		reqs = append(reqs, &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{
			CreateRequest: w.createRequest()}})
	}
	clear(m.queue)
	m.queue = m.queue[:0]
	return reqs, len(m.watches) == 0, nil
}

// createRequest is w's create request on a stream.
func (w *Watch) createRequest() *pb.WatchCreateRequest {
	r := &pb.WatchCreateRequest{Key: []byte(w.key), StartRevision: w.rev, PrevKv: w.prevKV, WatchId: w.id}
	if w.end != "" {
		r.RangeEnd = []byte(w.end)
	}
	if !w.puts {
		r.Filters = []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NOPUT}
	}
	return r
}

func (m *Mux) nextDue() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.delayed) == 0 {
		return time.Time{}
	}
	return m.delayed[0].due
}

// timer returns a channel that receives at next (never, for a zero next),
// and a function that stops the timer. Run's loops wake up about twice per
// acquisition (a new own-key watch, then its due time): they reuse one
// timer rather than allocate one per wake-up. Only Run's goroutine calls
// it.
func (m *Mux) timer(next time.Time) (<-chan time.Time, func()) {
	if next.IsZero() {
		return nil, func() {}
	}
	d := max(next.Sub(m.clk.Now()), 0)
	if m.wake == nil {
		m.wake = m.clk.NewTimer(d)
	} else {
		m.wake.Reset(d)
	}
	return m.wake.C(), func() { m.wake.Stop() }
}

// sleep waits for d on the clock and reports false if ctx ended first.
func (m *Mux) sleep(ctx context.Context, d time.Duration) bool {
	t := m.clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}

// endpointCount is how many endpoints a new stream may go to: 2 stands
// for more than one when the Mux was not made for a client.
func (m *Mux) endpointCount() int {
	if m.endpoints == nil {
		return 2
	}
	return m.endpoints()
}
