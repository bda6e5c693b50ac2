package guardian

import (
	"bytes"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// proc is one line of the process table: a pid, its parent and whether it
// has exited (a zombie, waiting to be reaped).
type proc struct {
	pid, ppid int
	zombie    bool
}

// readProc reads /proc/PID/stat; ok is false if the process is gone.
func readProc(pid int) (p proc, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return proc{}, false
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses, so
	// the fields start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return proc{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 {
		return proc{}, false
	}
	ppid, err := strconv.Atoi(string(f[1]))
	if err != nil {
		return proc{}, false
	}
	return proc{pid: pid, ppid: ppid, zombie: f[0][0] == 'Z'}, true
}

// below returns the live processes below root: its children, theirs, and
// so on. Because root is a child subreaper, that is every process the
// command started that has not exited, whatever session or group it is in.
func below(root int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]proc{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readProc(pid); ok {
			children[p.ppid] = append(children[p.ppid], p)
		}
	}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		parent := queue[0]
		queue = queue[1:]
		for _, c := range children[parent] {
			queue = append(queue, c.pid)
			if !c.zombie {
				out = append(out, c.pid)
			}
		}
	}
	return out
}

// isBelow reports whether pid is still a process below root. A pid read
// from /proc may have exited and been reused by then; a process pinned by
// a pidfd and found below root is the one that was meant.
func isBelow(pid, root int) bool {
	for range 4096 { // deeper than any real tree; ends a cycle read mid-change
		p, ok := readProc(pid)
		if !ok || p.ppid <= 1 {
			return false
		}
		if p.ppid == root {
			return true
		}
		pid = p.ppid
	}
	return false
}

// signalBelow sends sig to every live process below root. Each is pinned
// with a pidfd and checked before the signal, so a pid that was reused
// by an unrelated process is never signalled.
func signalBelow(root int, sig syscall.Signal) {
	for _, pid := range below(root) {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue // gone
		}
		if isBelow(pid, root) {
			_ = unix.PidfdSendSignal(fd, sig, nil, 0)
		}
		unix.Close(fd)
	}
}
