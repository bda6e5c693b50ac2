package guardian

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// Limits is what `etcdlock run` cannot guarantee on this system, printed
// when the guardian starts; empty on Linux, where every guarantee of the
// package documentation holds.
const Limits = ""

// The terminal requests that read and set its settings (the latter after
// pending output drains).
const (
	termiosGet      = unix.TCGETS
	termiosSetDrain = unix.TCSETSW
)

// becomeSubreaper makes every orphan below the guardian its child.
func becomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// setParentDeathSignal asks the kernel to send sig to the child when the
// thread that started it exits.
func setParentDeathSignal(a *syscall.SysProcAttr, sig syscall.Signal) {
	a.Pdeathsig = sig
}

// selfExe is the running binary. /proc/self/exe is it even if the file on
// disk was replaced since.
func selfExe() string { return "/proc/self/exe" }

// below lists the live processes below the guardian (see below). A
// guardian with no child at all, live or zombie, has nothing below it:
// as a subreaper it inherits every orphan of the tree, so a live
// descendant always has a live parent or is its child. One waitid then
// answers for the common case, a command that left nothing running,
// without walking /proc (whose dentries also cost the supervisor when it
// reaps the guardian).
func (g *guard) below() []int {
	if !hasChildren() {
		return nil
	}
	return below(g.self)
}

// hasChildren reports whether the calling process has a child, in any
// state; true when it cannot tell.
func hasChildren() bool {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WSTOPPED|unix.WCONTINUED|unix.WNOHANG|unix.WNOWAIT|unix.WALL, nil)
		if err != unix.EINTR {
			return err != unix.ECHILD
		}
	}
}

// signalBelow sends sig to every live process below the guardian (see
// signalBelow). In a namespace that is every other process of it, which
// one kill(-1) reaches, forks under way included: none can leave it, and
// none can refuse the guardian (a setuid program gains no other user
// there).
func (g *guard) signalBelow(sig syscall.Signal) (denied []int) {
	if g.ns {
		_ = unix.Kill(-1, sig)
		return nil
	}
	return signalBelow(g.self, sig)
}
