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

// Limits is what `etcdlock run` cannot guarantee on this system: anything.
const Limits = "etcdlock run needs process groups and POSIX signals, which this system does not have"

// ErrUnsupported is returned by Start on systems where no guardian can run.
var ErrUnsupported = errors.New("guardian: " + Limits)

// Guardian is the supervisor's handle on a running guardian process; none
// runs on this system.
type Guardian struct{}

// Spawn and Start refuse: see Limits.
func Spawn(Stdio, Containment) (*Guardian, error) { return nil, ErrUnsupported }
func Start(Stdio, Config) (*Guardian, error)      { return nil, ErrUnsupported }

// Main refuses: see Limits.
func Main(stderr io.Writer) int {
	fmt.Fprintln(stderr, "etcdlock:", Limits)
	return exitcode.Usage
}

// Guardian's methods are never called: Spawn and Start return no Guardian
// here.
func (*Guardian) Run(Config) error                       { return ErrExited }
func (*Guardian) Ready() error                           { return ErrExited }
func (*Guardian) Close()                                 {}
func (*Guardian) Events() <-chan Event                   { return nil }
func (*Guardian) Err() error                             { return ErrExited }
func (*Guardian) SetDeadline(soft, hard time.Time) error { return ErrExited }
func (*Guardian) Signal(syscall.Signal) error            { return ErrExited }
func (*Guardian) Stop(string, time.Duration) error       { return ErrExited }
func (*Guardian) Continue(bool) error                    { return ErrExited }
func (*Guardian) Containment() (Containment, string)     { return ContainTree, Limits }
