package guardian

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// setForeground gives the terminal on stdin to pgrp. The guardian is not
// in the foreground group, so SIGTTOU is blocked on this (locked) thread
// for the call; the kernel allows it then.
func (g *guard) setForeground(pgrp int) {
	if pgrp <= 0 {
		return
	}
	var set, old unix.Sigset_t
	sigaddset(&set, syscall.SIGTTOU)
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, &old); err != nil {
		return
	}
	_ = unix.IoctlSetPointerInt(0, unix.TIOCSPGRP, pgrp)
	_ = unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
}

// blockTerminalStops blocks SIGTTOU and SIGTTIN on the calling thread, the
// guardian's, which writes every note. The guardian is in a background
// group of the terminal: with `stty tostop` a note would stop it, and
// with it the deadline it enforces. Blocked, the signal lets the write
// through. Ignoring the signals instead would pass SIG_IGN on to the
// command for good. A blocked mask passes on too — Go starts a child
// with the mask of the thread that forks it — so startCommand unblocks
// them for the start (unblockTerminalStops).
func blockTerminalStops() { terminalStops(unix.SIG_BLOCK) }

func unblockTerminalStops() { terminalStops(unix.SIG_UNBLOCK) }

func terminalStops(how int) {
	var set unix.Sigset_t
	sigaddset(&set, syscall.SIGTTOU)
	sigaddset(&set, syscall.SIGTTIN)
	_ = unix.PthreadSigmask(how, &set, nil)
}

func sigaddset(set *unix.Sigset_t, sig syscall.Signal) {
	n := uint(sig - 1)
	set.Val[n/64] |= 1 << (n % 64)
}
