//go:build !linux

package main

import "os/exec"

// dieWithParent does nothing: only Linux has a parent-death signal. A
// member outlives this process if it is killed with SIGKILL; SIGINT and
// SIGTERM stop the members (stopMembers).
func dieWithParent(*exec.Cmd) {}
