package signals

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// TerminalStops is the signal set of SIGTTOU and SIGTTIN, which a process
// in a background group of its terminal gets for a write (with `stty
// tostop`), a read or a change of the terminal; for pthread_sigmask.
func TerminalStops() *unix.Sigset_t {
	var set unix.Sigset_t
	for _, sig := range []syscall.Signal{syscall.SIGTTOU, syscall.SIGTTIN} {
		n := uint(sig - 1)
		set.Val[n/64] |= 1 << (n % 64)
	}
	return &set
}
