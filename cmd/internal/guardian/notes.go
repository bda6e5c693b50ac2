//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package guardian

import (
	"io"
	"time"

	"github.com/etcdlock/etcdlock/cmd/internal/notes"
)

// noteQueue is how many notes may wait for a slow stderr; later ones are
// dropped.
const noteQueue = 32

// noteFlush bounds how long the guardian, at its exit, waits for queued
// notes to be written: everything is stopped by then, but the supervisor
// releases the lock only once the guardian has exited.
const noteFlush = 500 * time.Millisecond

// newNotes starts writing the guardian's notes on stderr from a goroutine
// of its own, so that a stderr that blocks never holds up the guardian's
// loop, which sends SIGKILL. A write to a stderr whose reader is gone
// fails with EPIPE: Main keeps SIGPIPE from killing the guardian.
func newNotes(w io.Writer) *notes.Queue {
	return notes.New(w, noteQueue, notes.TerminalThread)
}
