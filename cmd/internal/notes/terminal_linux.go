package notes

import (
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/etcdlock/etcdlock/cmd/internal/signals"
)

// TerminalThread, given to New as prepare, locks the writing goroutine to
// its thread for good and blocks SIGTTOU and SIGTTIN on that thread. A
// process in a background group of its terminal — etcdlock while its
// command has the terminal, the guardian always — is otherwise stopped by
// its own note when the terminal has `stty tostop` set, and a stopped
// etcdlock renews no lease: its command is stopped at the deadline. The
// other threads keep their masks, and so do the processes they start.
func TerminalThread() {
	runtime.LockOSThread()
	_ = unix.PthreadSigmask(unix.SIG_BLOCK, signals.TerminalStops(), nil)
}
