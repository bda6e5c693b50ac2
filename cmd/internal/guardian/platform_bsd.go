//go:build darwin || freebsd || netbsd || openbsd || dragonfly

package guardian

import (
	"errors"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// Limits is what `etcdlock run` cannot guarantee on this system, printed
// when the guardian starts the command. Without Linux's child subreaper, a process
// that leaves the command's process group and whose parent exits is
// re-parented to init, out of the guardian's reach; and without a
// parent-death signal, the guardian learns of the supervisor's death from
// the control pipe alone.
const Limits = "on this system the guardian stops the command's process group and the processes still below it; " +
	"a process that leaves the group (setsid, setpgid) after its parent exited is not stopped, " +
	"and is not waited for before the lock is released"

// The terminal requests that read and set its settings (the latter after
// pending output drains).
const (
	termiosGet      = unix.TIOCGETA
	termiosSetDrain = unix.TIOCSETAW
)

// becomeSubreaper does nothing: these systems have no child subreaper
// that x/sys/unix exposes (see Limits).
func becomeSubreaper() error { return nil }

// setParentDeathSignal does nothing: these systems have no parent-death
// signal; the control pipe's EOF tells the guardian its supervisor died.
func setParentDeathSignal(*syscall.SysProcAttr, syscall.Signal) {}

// selfExe is the running binary, as the system reports it.
func selfExe() string {
	if p, err := os.Executable(); err == nil {
		return p
	}
	return os.Args[0]
}

// setForeground gives the terminal on stdin to pgrp. The guardian is not
// in the foreground group; SIGTTOU is ignored while the guardian runs
// (ignoreTerminalStops), so the kernel allows it.
func (g *guard) setForeground(pgrp int) {
	if pgrp <= 0 {
		return
	}
	_ = unix.IoctlSetPointerInt(0, unix.TIOCSPGRP, pgrp)
}

// ignoreTerminalStops ignores SIGTTOU and SIGTTIN: the guardian is in a
// background group of the terminal, where a change of the terminal or,
// with `stty tostop`, a note would stop it, and with it the deadline it
// enforces. These systems have no per-thread signal mask in x/sys/unix, so
// the signals are ignored for the whole process instead, and restored for
// the command's start (startCall), which must not inherit SIG_IGN.
func ignoreTerminalStops() { signal.Ignore(syscall.SIGTTOU, syscall.SIGTTIN) }

// terminalCall runs f: the terminal stops are ignored (ignoreTerminalStops).
func terminalCall(f func()) { f() }

// startCall runs f, which starts the command, with SIGTTOU and SIGTTIN
// back at their defaults.
func startCall(f func()) {
	signal.Reset(syscall.SIGTTOU, syscall.SIGTTIN)
	defer ignoreTerminalStops()
	f()
}

// errNoNamespaces is spawnInNamespace's error: these systems have no PID
// namespaces.
var errNoNamespaces = errors.New("PID namespaces are Linux-only")

// namespaceAttrs lists no way: see errNoNamespaces.
func namespaceAttrs() []*syscall.SysProcAttr { return nil }

func namespaceRefused(error) bool { return false }

func setNamespace(_, _ *syscall.SysProcAttr) {}

// enterNamespace is never called: no guardian is the first process of a
// PID namespace here.
func enterNamespace() error { return errNoNamespaces }

// handBack is never asked for: the guardian names the supervisor's group
// itself here.
func (p *process) handBack() {}

// wakeTimer does nothing here: a guardian stopped together with etcdlock
// stops the command only once continued (see Limits).
type wakeTimer struct{}

func newWakeTimer() wakeTimer { return wakeTimer{} }

func (wakeTimer) at(int64) {}
