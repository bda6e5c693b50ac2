//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package guardian

import (
	"io"
	"runtime"
	"time"
)

// noteQueue is how many notes may wait for a slow stderr; later ones are
// dropped.
const noteQueue = 32

// noteFlush bounds how long the guardian, at its exit, waits for queued
// notes to be written: everything is stopped by then, but the supervisor
// releases the lock only once the guardian has exited.
const noteFlush = 500 * time.Millisecond

// notes writes the guardian's notes on stderr from a goroutine of its
// own, so that a stderr that blocks (a reader that never reads, a
// terminal paused with Ctrl-S) never holds up the guardian's loop, which
// sends SIGKILL. A write to a stderr whose reader is gone fails with
// EPIPE: Main keeps SIGPIPE from killing the guardian.
type notes struct {
	queue chan []byte
	done  chan struct{} // closed when the writer has written everything queued
}

// newNotes starts the writer; close stops it.
func newNotes(w io.Writer) *notes {
	n := &notes{queue: make(chan []byte, noteQueue), done: make(chan struct{})}
	go func() {
		defer close(n.done)
		// The guardian is in a background group of the terminal: with
		// `stty tostop` a write would stop the whole guardian unless
		// SIGTTOU is blocked on the writing thread (see
		// blockTerminalStops). The thread ends with the goroutine.
		runtime.LockOSThread()
		blockTerminalStops()
		for b := range n.queue {
			_, _ = w.Write(b)
		}
	}()
	return n
}

// add queues b without waiting; it is dropped if the queue is full.
func (n *notes) add(b []byte) {
	select {
	case n.queue <- b:
	default:
	}
}

// close waits up to within for the queued notes to be written. A writer
// blocked for longer is left behind: the guardian is about to exit.
func (n *notes) close(within time.Duration) {
	close(n.queue)
	t := time.NewTimer(within)
	defer t.Stop()
	select {
	case <-n.done:
	case <-t.C:
	}
}
