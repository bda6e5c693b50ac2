package guardian

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

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
	var buf [1024]byte
	b, ok := readSmall("/proc/"+strconv.Itoa(pid)+"/stat", buf[:])
	if !ok {
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

// readSmall reads a file of /proc that fits in buf with one read: three
// system calls where os.ReadFile makes five, which counts when a pass
// reads one file per process on the host.
func readSmall(path string, buf []byte) ([]byte, bool) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	defer unix.Close(fd)
	n, err := unix.Read(fd, buf)
	if err != nil || n <= 0 {
		return nil, false
	}
	return buf[:n], true
}

// below returns the live processes below root: its children, theirs, and
// so on. Because root is a child subreaper, that is every process the
// command started that has not exited, whatever session or group it is in.
// It walks the tree until two passes agree (see walker), for at most
// signalFor.
func below(root int) []int {
	w := &walker{root: root}
	end := time.Now().Add(signalFor)
	for {
		out := w.pass()
		if w.steady() || time.Now().After(end) {
			return out
		}
	}
}

// walker lists the processes below root, pass after pass. A pass walks
// down from root through /proc/PID/task/TID/children, which reads only the
// tree, however many processes the host runs. Kernels built without those
// files (CONFIG_PROC_CHILDREN) get a scan of /proc: the first pass reads
// every process, later ones only the processes already found and the pids
// allocated since the previous pass — a process outside the tree never
// moves into it, so a process new to the tree has a new pid.
//
// One pass can miss a live process: when a process in the tree exits
// during the pass, its children move up to root (the subreaper) — after
// root's children file was read, and before the exiting process's own
// file or state was — and are in no file as the pass read it. Stopping
// makes that likely: the kill signal to the command's group makes the
// shell exit while the guardian walks. Every such move comes with an exit,
// which changes what the next pass sees of the tree (a process alive, a
// zombie, or gone), so a caller walks until two passes in a row see the
// same tree (steady): the second found every process that existed
// throughout both, however they moved.
type walker struct {
	root    int
	last    int          // the namespace's last allocated pid when the previous scan began; 0 before one
	members map[int]bool // live processes below root found by the previous scan
	passes  int
	seen    map[int]bool // every process below root that this pass read, true for a zombie
	prev    map[int]bool // seen of the previous pass
}

// steady reports whether the last two passes saw the same tree.
func (w *walker) steady() bool {
	return w.passes >= 2 && maps.Equal(w.seen, w.prev)
}

// maxProbe bounds how many pids allocated since the previous scan a pass
// probes one by one before it reads the whole of /proc instead.
const maxProbe = 4096

func (w *walker) pass() []int {
	w.passes++
	w.prev, w.seen = w.seen, map[int]bool{}
	if out, ok := walkChildren(w.root, w.seen); ok {
		return out
	}
	clear(w.seen)
	return w.scan()
}

// walkHook, set only by tests, runs as walkChildren is about to read the
// children of pid, a process below root.
var walkHook func(pid int)

// walkChildren lists the live processes below root from the children
// files, and records in seen every process it read, live or zombie; ok is
// false if the kernel has none.
func walkChildren(root int, seen map[int]bool) (out []int, ok bool) {
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if walkHook != nil && pid != root {
			walkHook(pid)
		}
		dir := "/proc/" + strconv.Itoa(pid) + "/task/"
		tasks, err := os.ReadDir(dir)
		if err != nil {
			if pid == root {
				return nil, false
			}
			continue // exited since its parent's file was read
		}
		for _, task := range tasks {
			// Orphans are reparented to any thread of a subreaper, and a
			// child is listed under the thread that forked it.
			b, err := os.ReadFile(dir + task.Name() + "/children")
			if err != nil {
				if pid == root && errors.Is(err, os.ErrNotExist) {
					if _, err := os.Stat(dir + task.Name()); err == nil {
						return nil, false // the task is there, its children file is not
					}
				}
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				c, err := strconv.Atoi(f)
				if err != nil {
					continue
				}
				p, ok := readProc(c)
				if !ok {
					continue
				}
				seen[c] = p.zombie
				if !p.zombie {
					out = append(out, c)
					queue = append(queue, c)
				}
			}
		}
	}
	return out, true
}

// scan lists the live processes below root from /proc/PID/stat.
func (w *walker) scan() []int {
	candidates := w.candidates()
	procs := make(map[int]proc, len(candidates))
	for _, pid := range candidates {
		if p, ok := readProc(pid); ok {
			procs[pid] = p
		}
	}
	t := &ancestry{procs: procs, in: map[int]bool{w.root: true}}
	w.members = map[int]bool{}
	var out []int
	for _, pid := range candidates {
		p, ok := procs[pid]
		if !ok || pid == w.root || !t.isIn(pid, 0) {
			continue
		}
		w.seen[pid] = p.zombie
		if !p.zombie {
			w.members[pid] = true
			out = append(out, pid)
		}
	}
	return out
}

// candidates are the pids a scan reads: every process in /proc on the
// first scan, else the members of the previous one and the pids allocated
// since it began (all of /proc when there are too many or the kernel does
// not say).
func (w *walker) candidates() []int {
	last, lastOK := lastPid()
	var candidates []int
	if w.last == 0 || !lastOK || last < w.last || last-w.last > maxProbe {
		candidates = allPids()
	} else {
		for pid := range w.members {
			candidates = append(candidates, pid)
		}
		for pid := w.last + 1; pid <= last; pid++ {
			candidates = append(candidates, pid)
		}
	}
	if lastOK {
		w.last = last
	} else {
		w.last = 0
	}
	return candidates
}

// ancestry decides which processes are below a root, from the processes
// a scan read, reading an ancestor that was not a candidate when it is
// asked about.
type ancestry struct {
	procs map[int]proc // by pid; gains the ancestors read
	in    map[int]bool // pid is below the root; the root is in it, true
}

// isIn reports whether pid is below the root, depth levels below the
// process first asked about.
func (t *ancestry) isIn(pid int, depth int) bool {
	if v, ok := t.in[pid]; ok {
		return v
	}
	if pid <= 1 || depth > 4096 { // a cycle read mid-change
		return false
	}
	p, ok := t.procs[pid]
	if !ok {
		if p, ok = readProc(pid); !ok {
			t.in[pid] = false
			return false
		}
		t.procs[pid] = p
	}
	v := t.isIn(p.ppid, depth+1)
	t.in[pid] = v
	return v
}

// allPids lists every process in /proc.
func allPids() []int {
	f, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil
	}
	out := make([]int, 0, len(names))
	for _, n := range names {
		if pid, err := strconv.Atoi(n); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// lastPid is the last pid the kernel allocated in this pid namespace.
func lastPid() (int, bool) {
	var buf [32]byte
	b, ok := readSmall("/proc/sys/kernel/ns_last_pid", buf[:])
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	return n, err == nil && n > 0
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

// signalFor bounds one signalBelow: a tree that forks as fast as it is
// killed is chased this long before the guardian's loop runs again.
const signalFor = 100 * time.Millisecond

// signalBelow sends sig to every live process below root, and walks the
// tree again while that finds processes it has not signalled (one that
// forked and exited between the walk and the signal left a child, new to
// the tree) or the tree changed since the previous walk (a process that
// moved up to root as its parent exited may be missing from a walk; see
// walker). Each process is pinned with a pidfd and checked before the
// signal, so a pid that was reused by an unrelated process is never
// signalled. It returns the processes that refused the signal (EPERM):
// they changed their user id (a setuid program, as sudo is).
func signalBelow(root int, sig syscall.Signal) (denied []int) {
	w := &walker{root: root}
	sent := map[int]bool{}
	end := time.Now().Add(signalFor)
	for {
		fresh := false
		for _, pid := range w.pass() {
			if sent[pid] {
				continue // signalled, not yet gone
			}
			sent[pid], fresh = true, true
			fd, err := unix.PidfdOpen(pid, 0)
			if err != nil {
				continue // gone
			}
			if isBelow(pid, root) && errors.Is(unix.PidfdSendSignal(fd, sig, nil, 0), unix.EPERM) {
				denied = append(denied, pid)
			}
			unix.Close(fd)
		}
		if (!fresh && w.steady()) || time.Now().After(end) {
			return denied
		}
	}
}
