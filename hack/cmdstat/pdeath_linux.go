package main

import (
	"os/exec"
	"syscall"
)

// dieWithCmdstat makes the command get SIGKILL if cmdstat dies first (a
// benchmark script killed mid-run), rather than run on against a server
// the script has stopped.
func dieWithCmdstat(c *exec.Cmd) {
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
