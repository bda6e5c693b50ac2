package watchmux

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"

	"github.com/etcdlock/etcdlock/pkg/clock/clocktest"
)

// Every test runs in a bubble (testing/synctest), whose time moves only
// when all its goroutines are blocked: wait bounds every wait for the Mux
// to do something, and quiet is how long it is given to do something it
// must not do, both in the bubble's time (the Mux itself runs on a fake
// clock the tests step).
const (
	wait  = 5 * time.Second
	quiet = 50 * time.Millisecond
)

// fakeStream is the client end of a watch stream whose server is the test.
// Send blocks until the test takes the request, so the test sees every
// request in order and the Mux queues up what it would send meanwhile.
type fakeStream struct {
	grpc.ClientStream // not used by the Mux; nil
	t                 *testing.T
	ctx               context.Context
	sent              chan *pb.WatchRequest
	resps             chan *pb.WatchResponse
	fail              chan error

	// called is signaled, without blocking, each time Send is called;
	// mu guards the counts of the calls and of the requests the test
	// took, which tell whether a call is still blocked (see inSend).
	called       chan struct{}
	mu           sync.Mutex
	calls, taken int
	progress     int // progress requests sent
}

// progressRequests returns how many progress requests the Mux has sent.
func (s *fakeStream) progressRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.progress
}

// progressed answers a progress request as etcd does: a response with
// no watch ID and no events.
func (s *fakeStream) progressed(rev int64) {
	s.t.Helper()
	s.reply(&pb.WatchResponse{Header: &pb.ResponseHeader{Revision: rev}, WatchId: -1})
}

var _ pb.Watch_WatchClient = (*fakeStream)(nil)

func newFakeStream(ctx context.Context, t *testing.T) *fakeStream {
	return &fakeStream{t: t, ctx: ctx, sent: make(chan *pb.WatchRequest), resps: make(chan *pb.WatchResponse),
		fail: make(chan error), called: make(chan struct{}, 1)}
}

func (s *fakeStream) Send(r *pb.WatchRequest) error {
	if r.GetProgressRequest() != nil {
		// Taken at once and counted: etcd answers them only when the
		// test says so (progressed).
		s.mu.Lock()
		s.progress++
		s.mu.Unlock()
		return nil
	}
	s.mu.Lock()
	s.calls++
	s.mu.Unlock()
	select {
	case s.called <- struct{}{}:
	default: // a signal is pending already
	}
	select {
	case s.sent <- r:
		return nil
	case <-s.ctx.Done():
		return io.EOF
	}
}

// inSend waits until the Mux is blocked in Send with a request the test
// has not taken.
func (s *fakeStream) inSend() {
	s.t.Helper()
	timeout := time.After(wait)
	for {
		s.mu.Lock()
		blocked := s.calls > s.taken
		s.mu.Unlock()
		if blocked {
			return
		}
		select {
		case <-s.called:
		case <-timeout:
			s.t.Fatal("the Mux does not send")
		}
	}
}

func (s *fakeStream) Recv() (*pb.WatchResponse, error) {
	select {
	case r := <-s.resps:
		return r, nil
	case err := <-s.fail:
		return nil, err
	case <-s.ctx.Done():
		return nil, s.ctx.Err()
	}
}

func (s *fakeStream) Context() context.Context { return s.ctx }

func (s *fakeStream) CloseSend() error { return nil }

// next returns the next request the Mux sends.
func (s *fakeStream) next() *pb.WatchRequest {
	s.t.Helper()
	r := receive(s.t, s.sent, "request sent")
	s.mu.Lock()
	s.taken++
	s.mu.Unlock()
	return r
}

// create returns the next request, which must be a create.
func (s *fakeStream) create() *pb.WatchCreateRequest {
	s.t.Helper()
	r := s.next()
	c := r.GetCreateRequest()
	if c == nil {
		s.t.Fatalf("sent %v, want a create request", r)
	}
	return c
}

// cancel returns the ID of the next request, which must be a cancel.
func (s *fakeStream) cancel() int64 {
	s.t.Helper()
	r := s.next()
	c := r.GetCancelRequest()
	if c == nil {
		s.t.Fatalf("sent %v, want a cancel request", r)
	}
	return c.WatchId
}

// silent checks that the Mux sends nothing for a while.
func (s *fakeStream) silent() {
	s.t.Helper()
	none(s.t, s.sent, "request sent")
}

func (s *fakeStream) reply(r *pb.WatchResponse) {
	s.t.Helper()
	select {
	case s.resps <- r:
	case <-time.After(wait):
		s.t.Fatal("the Mux does not receive")
	}
}

// created replies that etcd created the watch c asked for.
func (s *fakeStream) created(c *pb.WatchCreateRequest) {
	s.t.Helper()
	s.reply(&pb.WatchResponse{Header: &pb.ResponseHeader{}, WatchId: c.WatchId, Created: true})
}

// deleted sends the deletion of c's key to c's watch.
func (s *fakeStream) deleted(c *pb.WatchCreateRequest, rev int64) {
	s.t.Helper()
	s.reply(&pb.WatchResponse{Header: &pb.ResponseHeader{Revision: rev}, WatchId: c.WatchId, Events: []*mvccpb.Event{
		{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: c.Key, ModRevision: rev}}}})
}

// put sends a put of c's key to c's watch.
func (s *fakeStream) put(c *pb.WatchCreateRequest, rev int64) {
	s.t.Helper()
	s.reply(&pb.WatchResponse{Header: &pb.ResponseHeader{Revision: rev}, WatchId: c.WatchId, Events: []*mvccpb.Event{
		{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: c.Key, CreateRevision: 2, ModRevision: rev}}}})
}

// compacted is etcd's reply ending watch id because its start revision was
// compacted.
func compacted(id int64) *pb.WatchResponse {
	return &pb.WatchResponse{Header: &pb.ResponseHeader{}, WatchId: id, Canceled: true, CompactRevision: 10}
}

// broken ends the stream with err, as a failed connection does.
func (s *fakeStream) broken(err error) {
	s.t.Helper()
	select {
	case s.fail <- err:
	case <-time.After(wait):
		s.t.Fatal("the Mux does not receive")
	}
}

// closed waits until the Mux has ended the stream.
func (s *fakeStream) closed() {
	s.t.Helper()
	select {
	case <-s.ctx.Done():
	case <-time.After(wait):
		s.t.Fatal("the stream is still open")
	}
}

// readCall is one call of the Mux's ReadFunc, answered by the test.
type readCall struct {
	keys  []string
	ctx   context.Context
	reply chan readResult
}

// answer answers with keys of these create revisions, none written since.
func (c *readCall) answer(rev int64, createRevs ...int64) {
	revs := make([]Revs, len(createRevs))
	for i, r := range createRevs {
		revs[i] = Revs{r, r}
	}
	c.answerRevs(rev, revs...)
}

func (c *readCall) answerRevs(rev int64, revs ...Revs) { c.reply <- readResult{rev: rev, revs: revs} }

func (c *readCall) fail(err error) { c.reply <- readResult{err: err} }

// harness runs a Mux against fake streams, a fake reader and a fake clock.
type harness struct {
	t     *testing.T
	clk   *clocktest.Fake
	mux   *Mux
	opens chan *fakeStream
	reads chan *readCall
}

func newHarness(t *testing.T) *harness {
	h := &harness{
		t:     t,
		clk:   clocktest.NewFake(time.Unix(1_000_000, 0)),
		opens: make(chan *fakeStream),
		reads: make(chan *readCall),
	}
	open := func(ctx context.Context) (pb.Watch_WatchClient, error) {
		s := newFakeStream(ctx, t)
		select {
		case h.opens <- s:
			return s, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	read := func(ctx context.Context, keys []string) (int64, []Revs, error) {
		c := &readCall{keys: keys, ctx: ctx, reply: make(chan readResult, 1)}
		select {
		case h.reads <- c:
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		}
		select {
		case r := <-c.reply:
			return r.rev, r.revs, r.err
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		}
	}
	h.mux = New(open, read, h.clk, zaptest.NewLogger(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.mux.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return h
}

// stream returns the next stream the Mux opens.
func (h *harness) stream() *fakeStream {
	h.t.Helper()
	return receive(h.t, h.opens, "stream opened")
}

// noStream checks that the Mux opens no stream for a while.
func (h *harness) noStream() {
	h.t.Helper()
	none(h.t, h.opens, "stream opened")
}

// read returns the Mux's next re-read.
func (h *harness) read() *readCall {
	h.t.Helper()
	return receive(h.t, h.reads, "re-read")
}

// step moves the fake clock on by d once the Mux waits for a timer. A
// timer's duration is computed from the clock's time, so the clock must
// not move while the Mux sets one: step waits until every goroutine of the
// test's bubble (synctest) is blocked.
func (h *harness) step(d time.Duration) {
	h.t.Helper()
	synctest.Wait()
	if !h.clk.HasWaiters() {
		h.t.Fatal("the Mux waits for no timer")
	}
	h.clk.Step(d)
}

// createdAll takes the next n requests, which must be creates, and replies
// to each that etcd created the watch.
func (s *fakeStream) createdAll(n int) {
	s.t.Helper()
	for range n {
		s.created(s.create())
	}
}

// errReset is how the tests break a stream.
var errReset = errors.New("connection reset")

// reconnect breaks s and returns the stream the Mux opens next, after the
// minimum backoff (s had worked).
func (h *harness) reconnect(s *fakeStream) *fakeStream {
	h.t.Helper()
	s.broken(errReset)
	h.step(minBackoff)
	return h.stream()
}

// held is where most tests start: a Mux with one own-key watch, of the key
// "held" from revision 3 (its create revision is 2), created by c on the
// open stream s; f records the watch's firing.
type held struct {
	*harness
	s *fakeStream
	c *pb.WatchCreateRequest
	f firing
}

func newHeld(t *testing.T) held {
	t.Helper()
	h := newHarness(t)
	f := newFiring()
	h.mux.WatchKey("held", 3, 2, 0, f.fire)
	s := h.stream()
	c := s.create()
	s.created(c)
	return held{harness: h, s: s, c: c, f: f}
}

// firing records a watch's callback.
type firing chan error

func newFiring() firing { return make(chan error, 2) }

func (f firing) fire(err error) { f <- err }

// fired waits for the callback and returns its error.
func (f firing) fired(t *testing.T) error {
	t.Helper()
	return receive(t, f, "firing of the watch")
}

// notFired checks that the callback has not run (and does not, for a while).
func (f firing) notFired(t *testing.T) {
	t.Helper()
	none(t, f, "firing of the watch")
}

// receive returns the next value on ch, failing t if none comes within
// wait.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(wait):
		t.Fatalf("no %s within %v", what, wait)
		panic("not reached")
	}
}

// none fails t if a value comes on ch within quiet: the Mux must not do
// what would send it.
func none[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("%s (%v), want none", what, v)
	case <-time.After(quiet):
	}
}

// entries counts what the Mux holds for its watches, in any state.
func (m *Mux) entries() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.watches) + len(m.delayed) + len(m.queue) + len(m.reread) + len(m.orphans) + len(m.pending) + len(m.cancels)
}
