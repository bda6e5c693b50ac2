//go:build darwin || freebsd || netbsd || openbsd || dragonfly

package guardian

import (
	"bufio"
	"bytes"
	"errors"
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
func (g *guard) below() []int { return belowOrIn(g.self, g.cmdPid) }

// signalBelow sends sig to the command's process group and to every live
// process below the guardian, and returns those that refused it (EPERM:
// they changed user id).
func (g *guard) signalBelow(sig syscall.Signal) (denied []int) {
	if g.cmdPid > 0 {
		_ = unix.Kill(-g.cmdPid, sig)
	}
	return signalAll(g.below(), sig)
}

// below lists the live processes below root (Guardian.Kill's view: the
// supervisor's descendants).
func below(root int) []int { return belowOrIn(root, 0) }

// signalBelow sends sig to every live process below root and returns
// those that refused it.
func signalBelow(root int, sig syscall.Signal) (denied []int) { return signalAll(below(root), sig) }

func signalAll(pids []int, sig syscall.Signal) (denied []int) {
	for _, pid := range pids {
		if errors.Is(unix.Kill(pid, sig), unix.EPERM) {
			denied = append(denied, pid)
		}
	}
	return denied
}

// belowOrIn lists the live processes below root or, if group is not 0,
// in that process group, from one `ps` listing.
func belowOrIn(root, group int) []int {
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
	walk(root)
	for _, p := range procs {
		if group > 0 && p.pgid == group {
			seen[p.pid] = true
		}
	}
	for _, p := range procs {
		if seen[p.pid] && !p.zombie && p.pid != psPid && p.pid != root {
			out = append(out, p.pid)
		}
	}
	return out
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
