//go:build unix

package signals

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Reraise makes the process die of sig with its default action, if sig is
// one of Reraised and is not ignored; otherwise, or if the process
// survives it, it returns and the caller exits with its code.
func Reraise(sig syscall.Signal) { reraise(os.Getpid(), sig) }

// ReraiseGroup is Reraise for the caller's whole process group: the
// terminal's Ctrl-C or Ctrl-\ reached only the command, which etcdlock
// had put in the terminal's foreground, and not the shell script that ran
// etcdlock, which would stop on it — as it does when a command it runs
// directly dies of the terminal's SIGINT, because the shell receives it
// too. Sending it to the group gives the script that signal.
func ReraiseGroup(sig syscall.Signal) { reraise(0, sig) }

// reraise sends sig to pid (0: the caller's process group) with sig's
// default action restored in this process.
func reraise(pid int, sig syscall.Signal) {
	if !reraisable(sig) {
		return
	}
	signal.Reset(sig) // Go's default action for these: die of the signal
	_ = syscall.Kill(pid, sig)
	// A fatal signal ends every thread before kill returns; this wait is
	// only for a kernel that delivers it later.
	time.Sleep(100 * time.Millisecond)
}

// Name is a signal's name as users know it: SIGTERM, not Go's
// "terminated".
func Name(sig syscall.Signal) string {
	if n := unix.SignalName(sig); n != "" {
		return n
	}
	return fmt.Sprintf("signal %d", int(sig))
}
