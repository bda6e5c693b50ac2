//go:build darwin || freebsd || netbsd || openbsd || dragonfly

package guardian

import (
	"bufio"
	"bytes"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// below lists the live processes in the command's process group or below
// the guardian, from one `ps` listing. Without a subreaper, a process
// whose parent exited is init's child; the group still finds it unless it
// left the group (see Limits).
func (g *guard) below() []int {
	procs, psPid := listProcs()
	children := map[int][]int{}
	var out []int
	seen := map[int]bool{}
	for _, p := range procs {
		children[p.ppid] = append(children[p.ppid], p.pid)
	}
	var walk func(pid int)
	walk = func(pid int) {
		for _, c := range children[pid] {
			if !seen[c] {
				seen[c] = true
				walk(c)
			}
		}
	}
	walk(g.self)
	for _, p := range procs {
		if g.cmdPid > 0 && p.pgid == g.cmdPid {
			seen[p.pid] = true
		}
	}
	for _, p := range procs {
		if seen[p.pid] && !p.zombie && p.pid != psPid && p.pid != g.self {
			out = append(out, p.pid)
		}
	}
	return out
}

// signalBelow sends sig to the command's process group and to every live
// process below the guardian.
func (g *guard) signalBelow(sig syscall.Signal) {
	if g.cmdPid > 0 {
		_ = unix.Kill(-g.cmdPid, sig)
	}
	for _, pid := range g.below() {
		_ = unix.Kill(pid, sig)
	}
}

// psProc is one line of `ps`.
type psProc struct {
	pid, ppid, pgid int
	zombie          bool
}

// listProcs runs ps for every process's pid, parent, group and state, and
// returns them with the pid of the ps process itself (a child of the
// guardian while it ran, reaped by Wait here).
func listProcs() ([]psProc, int) {
	c := exec.Command("ps", "-A", "-o", "pid=", "-o", "ppid=", "-o", "pgid=", "-o", "stat=")
	var buf bytes.Buffer
	c.Stdout = &buf
	if err := c.Start(); err != nil {
		return nil, 0
	}
	psPid := c.Process.Pid
	_ = c.Wait()
	var out []psProc
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 {
			continue
		}
		var p psProc
		var err1, err2, err3 error
		p.pid, err1 = strconv.Atoi(f[0])
		p.ppid, err2 = strconv.Atoi(f[1])
		p.pgid, err3 = strconv.Atoi(f[2])
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		p.zombie = strings.HasPrefix(f[3], "Z")
		out = append(out, p)
	}
	return out, psPid
}
