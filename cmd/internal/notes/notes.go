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
// full is dropped. Close stops the goroutine. Safe for concurrent use.
type Queue struct {
	mu     sync.Mutex
	closed bool
	queue  chan []byte
	done   chan struct{} // closed when the writer has written everything queued
}

// New starts writing to w, with room for size writes waiting. prepare, if
// not nil, runs first on the writing goroutine (to set up its thread).
func New(w io.Writer, size int, prepare func()) *Queue {
	q := &Queue{queue: make(chan []byte, size), done: make(chan struct{})}
	go func() {
		defer close(q.done)
		if prepare != nil {
			prepare()
		}
		for b := range q.queue {
			_, _ = w.Write(b)
		}
	}()
	return q
}

// Write queues a copy of p without waiting. It always reports success:
// a note that does not fit, or comes after Close, is dropped.
func (q *Queue) Write(p []byte) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return len(p), nil
	}
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
