package guardian

import (
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"
)

// Command is the argument that makes etcdlock run as a guardian, and
// EnvMarker the environment variable the supervisor sets for it alone, to
// Protocol: the version of the messages between the two. A process started
// by hand without the marker is refused, and a guardian from another
// release (a stale etcdlock-guardian beside etcdlock) exits at once, so
// that the supervisor falls back to its own binary.
const (
	Command   = "guardian"
	EnvMarker = "ETCDLOCK_GUARDIAN"
	Protocol  = "5"
)

// Binary is the name of the guardian's own small binary (cmd/etcdlock-
// guardian), which the supervisor starts when it finds it beside its own
// executable: it links nothing but this package, so it starts in a few
// milliseconds where re-executing etcdlock pays the whole program's
// initialisation again.
const Binary = "etcdlock-guardian"

// Containment is how the guardian holds every process of the command.
type Containment int

const (
	// ContainAuto is a PID namespace where the system allows one, else
	// the process tree.
	ContainAuto Containment = iota
	// ContainNamespace is a PID namespace whose first process is the
	// guardian: when the guardian dies, however it dies, the kernel kills
	// every process in it. Linux only; Spawn fails where it cannot be had.
	ContainNamespace
	// ContainTree is the guardian's process tree: a child subreaper on
	// Linux, the process group on the BSDs. It depends on the guardian or
	// the supervisor being alive to stop the command.
	ContainTree
)

// String is the value of etcdlock's --containment flag for c.
func (c Containment) String() string {
	switch c {
	case ContainNamespace:
		return "pid-namespace"
	case ContainTree:
		return "process-tree"
	}
	return "auto"
}

// ParseContainment parses a --containment value (see String).
func ParseContainment(s string) (Containment, error) {
	for _, c := range []Containment{ContainAuto, ContainNamespace, ContainTree} {
		if s == c.String() {
			return c, nil
		}
	}
	return 0, fmt.Errorf("unknown containment %q (want auto, pid-namespace or process-tree)", s)
}

// Stdio is the standard input and outputs of the guardian and the command.
type Stdio struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// Config describes the command a guardian runs.
type Config struct {
	// Argv is the command and its arguments; Argv[0] is looked up in PATH.
	Argv []string
	// Env is the command's whole environment; nil is the supervisor's
	// (the guardian's own differs: see Spawn).
	Env []string
	// KillSignal starts every stop; SIGKILL follows after KillGrace, or at
	// the hard deadline if that is sooner.
	KillSignal syscall.Signal
	KillGrace  time.Duration
	// Foreground puts the command's process group in the foreground of the
	// terminal on Stdin (which must be the controlling terminal, with the
	// caller's group in the foreground) and gives the terminal back after.
	Foreground bool
	// JSONNotes makes the guardian write its notes on Stderr as JSON
	// objects {"note": "..."}, as etcdlock's -w json does.
	JSONNotes bool
	// Quiet drops the guardian's notes (its stops, SIGKILL after the
	// grace, processes it cannot signal), as etcdlock's -q does; what
	// keeps the command from running (it cannot be started) is still
	// written.
	Quiet bool
	// Soft and Hard are the first deadlines: at Soft the guardian stops the
	// command unless told a later one; Hard is when SIGKILL must have gone
	// out. Hard is not before Soft.
	Soft, Hard time.Time
}

// Event is something the guardian reports.
type Event struct {
	// Started is the command's pid (its process group id too), once.
	Started int
	// Stopped is set when the command was stopped from the terminal.
	Stopped bool
	// Stopping acknowledges a Stop: the kill signal went out, SIGKILL
	// follows by the deadline.
	Stopping bool
	// Exited is set with Code when every process of the command is gone;
	// Code is the command's exit status (exitcode.SignalBase+N for signal
	// N, exitcode.CannotExecute if it could not be started,
	// exitcode.NotFound if it was not found).
	Exited bool
	Code   int
	// Signal is the signal that killed the command, with Exited; 0 if it
	// exited by itself.
	Signal syscall.Signal
	// StartError, with Exited, says why the command could not be started
	// (Code is then exitcode.CannotExecute or exitcode.NotFound); the
	// guardian does not print it: it is the error that ends the run.
	StartError string
}

// ErrNoNamespace is returned by Spawn and Ready under ContainNamespace
// where the guardian cannot have a PID namespace.
var ErrNoNamespace = errors.New("guardian: no PID namespace")

// ErrExited is returned by Guardian's methods once the guardian is gone.
var ErrExited = errors.New("guardian: the guardian process has exited")
