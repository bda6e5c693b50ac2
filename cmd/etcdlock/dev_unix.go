//go:build !windows

package main

import (
	"os"
	"syscall"

	"github.com/etcdlock/etcdlock/cmd/internal/exitcode"
)

// runDev replaces this process with etcdlock-dev, so that signals reach the
// server directly.
func runDev(args []string) error {
	path, err := findDevBinary()
	if err != nil {
		return withCode(exitcode.Config, err)
	}
	return syscall.Exec(path, append([]string{path}, args...), os.Environ())
}
