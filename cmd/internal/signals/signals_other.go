//go:build !unix

package signals

import (
	"fmt"
	"syscall"
)

// Reraise returns at once: this system has no signal to die of; the
// caller exits with its code.
func Reraise(syscall.Signal) {}

// ReraiseGroup returns at once, as Reraise.
func ReraiseGroup(syscall.Signal) {}

// Name is the signal's number: this system has no signal names.
func Name(sig syscall.Signal) string { return fmt.Sprintf("signal %d", int(sig)) }
