package main

import (
	"os"
	"syscall"

	"github.com/etcdlock/etcdlock/cmd/internal/guardian"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// superviseCommand is never reached on Windows: parseSignal refuses first.
func superviseCommand(_ *globalOptions, _ *guardian.Guardian, _ *lock.Lock, _ *lock.Session, _ []string, _ *runOptions, _ syscall.Signal, _ <-chan os.Signal) (int, syscall.Signal, error) {
	return 0, 0, usageErr("%s", guardian.Limits)
}
