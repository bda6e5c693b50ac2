//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package guardian

import (
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/etcdlock/etcdlock/cmd/internal/exitcode"
)

// Command is the argument that makes etcdlock run as a guardian, and
// EnvMarker the environment variable the supervisor sets for it alone.
const (
	Command   = "guardian"
	EnvMarker = "ETCDLOCK_GUARDIAN"
)

// Limits is what `etcdlock run` cannot guarantee on this system: anything.
const Limits = "etcdlock run needs process groups and POSIX signals, which this system does not have"

// ErrUnsupported is returned by Start on systems where no guardian can run.
var ErrUnsupported = errors.New("guardian: " + Limits)

// Config describes the command a guardian runs (see the Linux
// documentation of package guardian).
type Config struct {
	Argv                  []string
	Env                   []string
	Stdin                 io.Reader
	Stdout, Stderr        io.Writer
	KillSignal            syscall.Signal
	KillGrace             time.Duration
	Foreground, JSONNotes bool
	Soft, Hard            time.Time
}

// Event is something the guardian reports.
type Event struct {
	Started int
	Stopped bool
	Exited  bool
	Code    int
}

// ErrExited is returned by Guardian's methods once the guardian is gone.
var ErrExited = errors.New("guardian: the guardian process has exited")

// Guardian is the supervisor's handle on a running guardian process; none
// runs on this system.
type Guardian struct{}

// Start refuses: see Limits.
func Start(Config) (*Guardian, error) { return nil, ErrUnsupported }

// Main refuses: see Limits.
func Main(stderr io.Writer) int {
	fmt.Fprintln(stderr, "etcdlock:", Limits)
	return exitcode.Usage
}

// Events, Err, SetDeadline, Signal, Stop and Continue are never called:
// Start returns no Guardian here.
func (*Guardian) Events() <-chan Event                   { return nil }
func (*Guardian) Err() error                             { return ErrExited }
func (*Guardian) SetDeadline(soft, hard time.Time) error { return ErrExited }
func (*Guardian) Signal(syscall.Signal) error            { return ErrExited }
func (*Guardian) Stop(string, time.Duration) error       { return ErrExited }
func (*Guardian) Continue(bool) error                    { return ErrExited }
