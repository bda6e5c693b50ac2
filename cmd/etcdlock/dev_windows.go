package main

import (
	"errors"
	"os"
	"os/exec"

	"github.com/etcdlock/etcdlock/cmd/internal/exitcode"
)

// runDev runs etcdlock-dev as a child (Windows cannot replace a process)
// and exits with its code; Ctrl-C reaches both, as one console group.
func runDev(args []string) error {
	path, err := findDevBinary()
	if err != nil {
		return withCode(exitcode.Config, err)
	}
	c := exec.Command(path, args...)
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	err = c.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return &exitErr{code: ee.ExitCode()}
	}
	return err
}
