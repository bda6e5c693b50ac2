package main

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes a member die with this process, even on SIGKILL.
func dieWithParent(c *exec.Cmd) {
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
