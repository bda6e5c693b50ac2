package guardian

import (
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/etcdlock/etcdlock/cmd/internal/signals"
)

// The guardian is in a background process group of the terminal, where
// the kernel stops a process that changes the terminal (TIOCSPGRP,
// TCSETSW) or, with `stty tostop`, writes to it: SIGTTOU, unless the
// calling thread blocks it. Stopped, the guardian would not enforce its
// deadline. So every such call is made on a thread that blocks SIGTTOU and
// SIGTTIN for the call (terminalCall), and the notes are written from a
// thread that blocks them for good (notes.TerminalThread). Ignoring the
// signals instead would pass SIG_IGN on to the command. The main goroutine
// is not locked to a thread: a locked goroutine hands its P to another
// thread each time it waits, which cost the guardian about 1 ms of CPU on
// every `etcdlock run`.

// setForeground gives the terminal on stdin to pgrp.
func (g *guard) setForeground(pgrp int) {
	if pgrp <= 0 {
		return
	}
	terminalCall(func() { _ = unix.IoctlSetPointerInt(0, unix.TIOCSPGRP, pgrp) })
}

// terminalCall runs f with SIGTTOU and SIGTTIN blocked on its thread.
func terminalCall(f func()) { withTerminalStops(unix.SIG_BLOCK, f) }

// startCall runs f, which starts the command, with SIGTTOU and SIGTTIN
// unblocked on its thread: Go starts a child with the signal mask of the
// thread that forks it, and the command must get the terminal stops whatever
// the guardian inherited from etcdlock. (The child's TIOCSPGRP for
// Foreground runs with every signal blocked, before the mask is restored.)
//
// The command is started with a parent-death signal, which the kernel
// sends when the thread that forked it exits. The Go runtime ends a thread
// only when a goroutine locked to it exits; the guardian's only such
// goroutine is the notes writer, which ends at Close, once every process
// below the guardian is gone.
//
// The child also gets the forking thread's capabilities: the thread drops
// the ambient one that a user namespace's /proc mount needed
// (namespaceAttrs), so that the command runs without it.
func startCall(f func()) {
	withTerminalStops(unix.SIG_UNBLOCK, func() {
		dropInheritedCaps()
		f()
	})
}

// dropInheritedCaps empties the calling thread's ambient and inheritable
// capability sets, which an exec passes on.
func dropInheritedCaps() {
	_ = unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if unix.Capget(&hdr, &data[0]) == nil && data[0].Inheritable|data[1].Inheritable != 0 {
		data[0].Inheritable, data[1].Inheritable = 0, 0
		_ = unix.Capset(&hdr, &data[0])
	}
}

// withTerminalStops runs f locked to one thread with SIGTTOU and SIGTTIN
// blocked (how is SIG_BLOCK) or unblocked (SIG_UNBLOCK) on it, then
// restores that thread's mask.
func withTerminalStops(how int, f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old unix.Sigset_t
	if err := unix.PthreadSigmask(how, signals.TerminalStops(), &old); err != nil {
		f()
		return
	}
	defer func() { _ = unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil) }()
	f()
}

// ignoreTerminalStops does nothing on Linux: each terminal call blocks
// the signals on its own thread.
func ignoreTerminalStops() {}
