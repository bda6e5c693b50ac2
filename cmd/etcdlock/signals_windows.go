package main

import (
	"syscall"

	"github.com/etcdlock/etcdlock/cmd/internal/guardian"
)

// parseSignal refuses on Windows, which has no process groups to signal:
// run and elect check --kill-signal before they acquire anything, so they
// refuse here with a usage error instead of taking a lock they cannot
// honour.
func parseSignal(string) (syscall.Signal, error) {
	return 0, usageErr("%s", guardian.Limits)
}
