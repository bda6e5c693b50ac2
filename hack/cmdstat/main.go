//go:build unix

// Command cmdstat runs a command and prints, on one line of stdout, its
// wall time, the CPU time (user + system) of it and every descendant it
// waited for, and its peak resident set, as reported by wait4:
//
//	wall_us cpu_us maxrss_kb exit_code
//
// The command's own output is discarded. hack/bench-cli.sh uses it to
// compare etcdlock run with etcdctl lock; /usr/bin/time reports CPU in
// steps of 10 ms, too coarse for a 50 ms command.
//
//	go run ./hack/cmdstat CMD [ARG...]
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: cmdstat CMD [ARG...]")
		os.Exit(64)
	}
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	dieWithCmdstat(cmd)
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		fmt.Fprintln(os.Stderr, "cmdstat:", err)
		os.Exit(1)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		fmt.Fprintln(os.Stderr, "cmdstat: no resource usage on this system")
		os.Exit(1)
	}
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	fmt.Printf("%d %d %d %d\n", wall.Microseconds(), cpu.Microseconds(), ru.Maxrss, cmd.ProcessState.ExitCode())
}
