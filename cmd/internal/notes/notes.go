// Package notes writes the messages of the etcdlock processes to a stderr
// that may block (a pipe nobody reads, a terminal paused with Ctrl-S)
// without ever making them wait: a kill path never waits on output.
package notes

import (
	"io"
	"sync"
	"time"
)

// Queue is an io.Writer that hands each write to a goroutine of its own,
// which writes it to the underlying writer; a write that finds the queue
// full is dropped. The goroutine starts with the first write: a process
// with nothing to say (the guardian, mostly) pays neither for it nor for
// the thread prepare may lock it to. Close stops the goroutine. Safe for
// concurrent use.
type Queue struct {
	mu      sync.Mutex
	closed  bool
	started bool // the writing goroutine runs, or ran
	queue   chan []byte
	done    chan struct{} // closed when the writer has written everything queued
	w       io.Writer
	prepare func()
}

// New returns a Queue that writes to w, with room for size writes
// waiting. prepare, if not nil, runs first on the writing goroutine (to
// set up its thread).
func New(w io.Writer, size int, prepare func()) *Queue {
	return &Queue{queue: make(chan []byte, size), done: make(chan struct{}), w: w, prepare: prepare}
}

// start starts the writing goroutine, once; q.mu is held.
func (q *Queue) start() {
	if q.started {
		return
	}
	q.started = true
	go func() {
		defer close(q.done)
		if q.prepare != nil {
			q.prepare()
		}
		for b := range q.queue {
			_, _ = q.w.Write(b)
		}
	}()
}

// Write queues a copy of p without waiting. It always reports success:
// a note that does not fit, or comes after Close, is dropped.
func (q *Queue) Write(p []byte) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return len(p), nil
	}
	q.start()
	select {
	case q.queue <- append([]byte(nil), p...):
	default:
	}
	return len(p), nil
}

// Close waits up to within for the queued writes to be written, and
// reports whether they were. A writer blocked for longer is left behind:
// the caller is about to exit. Later calls return at once.
func (q *Queue) Close(within time.Duration) bool {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		close(q.queue)
		if !q.started {
			q.started = true
			close(q.done) // nothing was ever written
		}
	}
	q.mu.Unlock()
	t := time.NewTimer(within)
	defer t.Stop()
	select {
	case <-q.done:
		return true
	case <-t.C:
		return false
	}
}
