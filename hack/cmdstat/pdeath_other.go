//go:build unix && !linux

package main

import "os/exec"

// dieWithCmdstat does nothing here: there is no parent-death signal.
func dieWithCmdstat(*exec.Cmd) {}
