//go:build !windows

package main

import (
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// parseSignal accepts TERM, SIGTERM, term or a number.
func parseSignal(s string) (syscall.Signal, error) {
	if n, err := strconv.Atoi(s); err == nil && n > 0 && n < 65 {
		return syscall.Signal(n), nil
	}
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(name); sig != 0 {
		return sig, nil
	}
	return 0, usageErr("--kill-signal %q: unknown signal", s)
}
