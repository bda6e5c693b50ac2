package notes

import (
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
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
	var set unix.Sigset_t
	for _, sig := range []syscall.Signal{syscall.SIGTTOU, syscall.SIGTTIN} {
		n := uint(sig - 1)
		set.Val[n/64] |= 1 << (n % 64)
	}
	_ = unix.PthreadSigmask(unix.SIG_BLOCK, &set, nil)
}
