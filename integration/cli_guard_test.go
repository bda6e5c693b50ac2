//go:build linux

package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// The tests below hold a lock with `etcdlock run` around a command that
// leaves processes behind in three ways — a plain background child, one
// that left the process group with setsid, and one whose parent exited (a
// double fork) — and check, with a second holder waiting on its own
// connection, that the second holder never gets the lock while any of
// them is alive.

// The guardian tests' own harness lives here (runGuarded, nextHolder,
// leaveBehind); cli_consistency_test.go, cli_output_test.go and
// cli_tty_test.go use it too. The helpers all suites share are in
// helpers_test.go.

// leaveBehind starts the three kinds of leftovers and writes the shell's
// pid and theirs to $D/pids.
const leaveBehind = `sleep 1000 & a=$!
setsid sleep 1001 & b=$!
(sleep 1002 & echo $! > "$D/c"); c=$(cat "$D/c")
echo "$$ $a $b $c" > "$D/pids.tmp"; mv "$D/pids.tmp" "$D/pids"
`

type guarded struct {
	cmd    *exec.Cmd
	stderr *lockedBuffer
	pids   []int
	dir    string
}

// runGuarded starts `etcdlock run job --shell -- script` and waits for
// the script to write its pids.
func runGuarded(t *testing.T, endpoint string, script string, flags ...string) *guarded {
	t.Helper()
	return runGuardedTo(t, endpoint, nil, script, flags...)
}

// runGuardedTo is runGuarded with the run's stdout and stderr on out (a
// pipe the test controls) when out is not nil.
func runGuardedTo(t *testing.T, endpoint string, out *os.File, script string, flags ...string) *guarded {
	t.Helper()
	return runGuardedOn(t, endpoint, out, []string{"job"}, script, flags...)
}

// runGuardedOn is runGuardedTo for a run of names.
func runGuardedOn(t *testing.T, endpoint string, out *os.File, names []string, script string, flags ...string) *guarded {
	t.Helper()
	g := &guarded{stderr: &lockedBuffer{}, dir: t.TempDir()}
	args := append(append([]string{"run"}, names...), flags...)
	g.cmd = cliCommand(t, endpoint, []string{"D=" + g.dir}, append(args, "--shell", "--", script)...)
	g.cmd.Stderr = g.stderr
	if out != nil {
		g.cmd.Stdout, g.cmd.Stderr = out, out
	}
	g.cmd.WaitDelay = 5 * time.Second // leftovers holding stderr must not hang Wait
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = g.cmd.Process.Kill()
		_ = g.cmd.Wait()
		for _, p := range g.pids {
			if procAlive(p) {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
		}
	})
	etcdtest.Eventually(t, 20*time.Second, func() bool {
		b, err := os.ReadFile(filepath.Join(g.dir, "pids"))
		if err != nil {
			return false
		}
		// A process gone by now (the shell of a script that did not
		// wait) has nothing left to check.
		for _, f := range strings.Fields(string(b)) {
			n, _ := strconv.Atoi(f)
			if p, ok := findPID(t, g.cmd.Process.Pid, n); ok {
				g.pids = append(g.pids, p)
			}
		}
		return true
	}, "the command did not start")
	return g
}

func procAlive(pid int) bool { return syscall.Kill(pid, 0) == nil && !isZombie(pid) }

// alive returns the pids still running.
func (g *guarded) alive() []int {
	var out []int
	for _, p := range g.pids {
		if procAlive(p) {
			out = append(out, p)
		}
	}
	return out
}

// deadAt polls until every pid is gone and returns when it saw that.
func (g *guarded) deadAt(t *testing.T, within time.Duration) time.Time {
	t.Helper()
	end := time.Now().Add(within)
	for time.Now().Before(end) {
		if len(g.alive()) == 0 {
			return time.Now()
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("processes %v still alive after %v; stderr:\n%s", g.alive(), within, g.stderr)
	return time.Time{}
}

type handover struct {
	at    time.Time
	alive []int // the first holder's processes alive when the lock came
	err   error
}

// nextHolder waits for "job" on its own connection to etcd and, the
// moment it has the lock, records which of g's processes are alive.
func nextHolder(t *testing.T, g *guarded) <-chan handover {
	t.Helper()
	return nextHolderOf(t, g, "job")
}

// nextHolderOf is nextHolder for another name than job.
func nextHolderOf(t *testing.T, g *guarded, name string) <-chan handover {
	t.Helper()
	// A TTL that a loaded machine's late renewals do not end: this session
	// only waits its turn, and what the test times is when it gets it.
	s := session(t, etcdtest.Client(t, shared.Endpoints()[0]), "next", lock.WithTTL(10*time.Second))
	out := make(chan handover, 1)
	ctx := testCtx(t, time.Minute)
	go func() {
		l, err := s.Acquire(ctx, name)
		h := handover{at: time.Now(), err: err}
		if err == nil {
			h.alive = g.alive()
			_ = l.Release(context.WithoutCancel(ctx))
		}
		out <- h
	}()
	return out
}

func (h handover) check(t *testing.T) {
	t.Helper()
	if h.err != nil {
		t.Fatalf("next holder: %v", h.err)
	}
	if len(h.alive) > 0 {
		t.Errorf("next holder got the lock while the first holder's processes %v were alive", h.alive)
	}
}

// The command exits normally and leaves processes: they are stopped
// (reported on stderr) before the lock is released.
func TestCLINormalExitStopsLeftoversBeforeRelease(t *testing.T) {
	t.Parallel()
	g := runGuarded(t, shared.Endpoints()[0], leaveBehind+`date +%s%N > "$D/exit"`)
	next := nextHolder(t, g)
	if err := g.cmd.Wait(); err != nil {
		t.Fatalf("etcdlock: %v; stderr:\n%s", err, g.stderr)
	}
	if a := g.alive(); len(a) > 0 {
		t.Errorf("etcdlock returned with %v still running", a)
	}
	h := <-next
	h.check(t)
	b, _ := os.ReadFile(filepath.Join(g.dir, "exit"))
	ns, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	t.Logf("command exited → next holder acquired in %v", h.at.Sub(time.Unix(0, ns)).Round(time.Millisecond))
	if !strings.Contains(g.stderr.String(), "left 3 processes running") {
		t.Errorf("stderr does not report the leftovers:\n%s", g.stderr)
	}
}

// etcdlock is killed with SIGKILL: the command and everything it started
// die at once, long before etcd expires the lease.
func TestCLISupervisorKilled(t *testing.T) {
	t.Parallel()
	g := runGuarded(t, shared.Endpoints()[0], leaveBehind+"wait", "--ttl", "3s")
	next := nextHolder(t, g)
	killed := time.Now()
	if err := g.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	dead := g.deadAt(t, 5*time.Second)
	h := <-next
	h.check(t)
	t.Logf("kill -9 etcdlock → all %d processes dead in %v; next holder acquired %v after the kill",
		len(g.pids), dead.Sub(killed).Round(100*time.Microsecond), h.at.Sub(killed).Round(time.Millisecond))
	if !h.at.After(dead) {
		t.Errorf("next holder acquired at %v, before the processes were dead at %v", h.at, dead)
	}
}

var lateRE = regexp.MustCompile(`by the deadline \(([0-9.]+[µm]?s) ago\)`)

// etcdlock is frozen with SIGSTOP: its guardian stops the command when the
// last deadline it was told passes — here a shell whose children ignore
// SIGTERM, so that SIGKILL has to come before etcd could expire the lease.
func TestCLISupervisorFrozen(t *testing.T) {
	t.Parallel()
	g := runGuarded(t, shared.Endpoints()[0], "trap '' TERM\n"+leaveBehind+"wait", "--ttl", "3s", "--kill-grace", "1m")
	next := nextHolder(t, g)
	frozen := time.Now()
	if err := g.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	dead := g.deadAt(t, 10*time.Second)
	h := <-next
	h.check(t)
	late := "?"
	if m := lateRE.FindStringSubmatch(g.stderr.String()); m != nil {
		late = m[1]
	} else {
		t.Errorf("guardian did not report the missed deadline:\n%s", g.stderr)
	}
	t.Logf("kill -STOP etcdlock → SIGTERM %s after the deadline, all dead %v after the freeze; next holder acquired %v after the freeze (lead %v)",
		late, dead.Sub(frozen).Round(time.Millisecond), h.at.Sub(frozen).Round(time.Millisecond), h.at.Sub(dead).Round(time.Millisecond))
	if !strings.Contains(g.stderr.String(), "SIGKILL") {
		t.Errorf("stderr does not report SIGKILL:\n%s", g.stderr)
	}
}

// A negative control for the checks above: without a guardian (the
// leftover started outside etcdlock's reach, by a process etcdlock does
// not supervise), nextHolder's check does see a live process.
func TestCLIGuardCheckCanFail(t *testing.T) {
	t.Parallel()
	g := runGuarded(t, shared.Endpoints()[0], leaveBehind)
	outside := exec.Command("sleep", "1000")
	if err := outside.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = outside.Process.Kill(); _ = outside.Wait() }()
	g.pids = append(g.pids, outside.Process.Pid)
	next := nextHolder(t, g)
	_ = g.cmd.Wait()
	h := <-next
	if len(h.alive) != 1 || h.alive[0] != outside.Process.Pid {
		t.Errorf("check saw %v alive, want only the outside process %d", h.alive, outside.Process.Pid)
	}
}

// forkChain is a process that forks and exits in a loop: one process is
// alive at a time, with a new pid each generation. It ignores SIGTERM,
// appends "microseconds pid" to its second argument at each generation,
// and ends by itself at its first (Unix seconds).
const forkChain = `use Time::HiRes qw(time);
$SIG{TERM} = 'IGNORE';
my ($end, $log) = @ARGV;
while (1) {
	my $now = time;
	exit 0 if $now > $end;
	open(my $f, '>>', $log) or die; printf $f "%d %d\n", $now * 1e6, $$; close $f;
	my $pid = fork;
	exit 0 if $pid;
}
`

// hostProcs is how many idle processes TestCLISupervisorKilledForkChain
// adds to the host: every process on the host is a cost to a guardian
// that reads all of /proc.
const hostProcs = 1000

// idleProcesses starts n sleeping processes in one process group, killed
// at cleanup.
func idleProcesses(t *testing.T, n int) {
	t.Helper()
	sh := exec.Command("sh", "-c", `i=0; while [ $i -lt `+strconv.Itoa(n)+` ]; do sleep 1000 & i=$((i+1)); done; echo started; wait`)
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &lockedBuffer{}
	sh.Stdout = out
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-sh.Process.Pid, syscall.SIGKILL)
		_ = sh.Wait()
	})
	etcdtest.Eventually(t, time.Minute, func() bool { return strings.Contains(out.String(), "started") }, "idle processes not started")
}

// etcdlock is killed with SIGKILL while the command left a fork-and-exit
// chain in its own session, on a host with many other processes: the
// guardian kills the chain before the next holder gets the lock.
func TestCLISupervisorKilledForkChain(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("perl"); err != nil {
		t.Fatal("perl (Debian's essential perl-base) is needed for the fork chain")
	}
	idleProcesses(t, hostProcs)
	dir := t.TempDir()
	chain, log := filepath.Join(dir, "chain.pl"), filepath.Join(dir, "chain.log")
	if err := os.WriteFile(chain, []byte(forkChain), 0o644); err != nil {
		t.Fatal(err)
	}
	end := time.Now().Add(20 * time.Second).Unix() // the chain's own bound
	script := `setsid perl ` + chain + ` ` + strconv.FormatInt(end, 10) + ` ` + log + ` &
echo $$ > "$D/pids.tmp"; mv "$D/pids.tmp" "$D/pids"; wait`
	g := runGuarded(t, shared.Endpoints()[0], script, "--ttl", "3s")
	generations := func() [][2]int64 {
		b, _ := os.ReadFile(log)
		var out [][2]int64
		for _, line := range strings.Split(string(b), "\n") {
			var us, pid int64
			if _, err := fmt.Sscan(line, &us, &pid); err == nil {
				out = append(out, [2]int64{us, pid})
			}
		}
		return out
	}
	etcdtest.Eventually(t, 10*time.Second, func() bool { return len(generations()) > 20 }, "the fork chain did not run")
	next := nextHolder(t, g)
	killed := time.Now()
	if err := g.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	h := <-next
	h.check(t)
	gens := generations()
	last := time.UnixMicro(gens[len(gens)-1][0])
	var after int
	for _, gen := range gens {
		if time.UnixMicro(gen[0]).After(h.at) {
			after++
		}
	}
	if after > 0 {
		t.Errorf("%d generations of the fork chain started after the next holder got the lock (%v after the kill); the last %v after the kill",
			after, h.at.Sub(killed).Round(time.Millisecond), last.Sub(killed).Round(time.Millisecond))
	}
	t.Logf("kill -9 etcdlock with %d idle processes on the host: last of %d chain generations %v after the kill; next holder acquired %v after the kill",
		hostProcs, len(gens), last.Sub(killed).Round(time.Millisecond), h.at.Sub(killed).Round(time.Millisecond))
}

// guardianOf is the pid of the guardian of a runGuarded: the parent of
// the command's shell.
func (g *guarded) guardianOf(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", g.pids[0]))
	if err != nil {
		t.Fatalf("the command's shell is gone before the test killed anything (%v): stderr %q", err, g.stderr.String())
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ppid := 0
	if len(f) > 1 {
		ppid, _ = strconv.Atoi(f[1])
	}
	if ppid <= 1 {
		t.Fatalf("the command's shell has no guardian parent: /proc/%d/stat = %q", g.pids[0], b)
	}
	return ppid
}

// The guardian is killed with SIGKILL: etcdlock, a subreaper too, kills
// every process the command left, including those that left its session.
func TestCLIGuardianKilled(t *testing.T) {
	t.Parallel()
	g := runGuarded(t, shared.Endpoints()[0], "trap '' TERM\n"+leaveBehind+"wait", "--ttl", "3s")
	if err := syscall.Kill(g.guardianOf(t), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	g.deadAt(t, 10*time.Second)
	if err := g.cmd.Wait(); err == nil {
		t.Errorf("etcdlock exited 0 after its guardian was killed")
	}
	if r := cli(t, shared.Endpoints()[0], nil, "status", "job"); !strings.Contains(r.stdout, "free") {
		t.Errorf("lock not released: %q", r.stdout)
	}
}

// The guardian is frozen (SIGSTOP) and the lock is broken: the guardian
// cannot stop the command, so etcdlock, finding its stop unacknowledged,
// kills the guardian and every process of the command itself.
func TestCLIGuardianFrozenLockBroken(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	g := runGuarded(t, ep, "trap '' TERM\n"+leaveBehind+"wait", "--ttl", "3s")
	guardian := g.guardianOf(t)
	if err := syscall.Kill(guardian, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(guardian, syscall.SIGKILL) })
	st := cli(t, ep, nil, "status", "job")
	m := regexp.MustCompile(`\(token (\d+)`).FindStringSubmatch(st.stdout)
	if m == nil {
		t.Fatalf("status: %q", st.stdout)
	}
	if r := cli(t, ep, nil, "break", "job", "--token", m[1]); r.code != 0 {
		t.Fatalf("break: %d %s", r.code, r.stderr)
	}
	g.deadAt(t, 10*time.Second)
	if err := g.cmd.Wait(); exitCodeOf(err) != 79 {
		t.Errorf("etcdlock: %v, want exit 79; stderr:\n%s", err, g.stderr)
	}
	if !strings.Contains(g.stderr.String(), "guardian") {
		t.Errorf("stderr does not say what happened to the guardian:\n%s", g.stderr)
	}
}

// A process the command started that changed its user id (a setuid
// program, as sudo is) refuses every signal of an unprivileged etcdlock
// in the process tree: the guardian says so and waits for it to exit, and
// etcdlock then exits with the command's code. The test, as root, runs
// etcdlock as nobody and gives it a setuid-root copy of setpriv.
func TestCLILeftoverChangedUserID(t *testing.T) {
	t.Parallel()
	setpriv, helper, out := setuidHelper(t)
	cmd := cliCommand(t, shared.Endpoints()[0], []string{"H=" + helper, "D=" + out}, "run", "job", "--containment", "process-tree", "--shell", "--",
		`"$H" --reuid=0 --regid=0 --clear-groups sh -c 'echo $$ > "$D/pid"; sleep 3' & while [ ! -s "$D/pid" ]; do sleep 0.01; done; exit 3`)
	cmd.Args = append([]string{setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"}, cmd.Args...)
	cmd.Path = setpriv
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	root := pidIn(t, cmd.Process.Pid, filepath.Join(out, "pid"))
	t.Cleanup(func() { _ = syscall.Kill(root, syscall.SIGKILL) })
	if err := cmd.Wait(); exitCodeOf(err) != 3 {
		t.Errorf("etcdlock: %v, want the command's 3; stderr:\n%s", err, stderr)
	}
	if procAlive(root) {
		t.Errorf("etcdlock exited with the root process %d alive", root)
	}
	if !strings.Contains(stderr.String(), "cannot be signalled") || !strings.Contains(stderr.String(), strconv.Itoa(root)) {
		t.Errorf("the guardian did not say why it waits:\n%s", stderr)
	}
}

// In the PID namespace of an unprivileged etcdlock (its own user
// namespace, which maps only its user), a setuid program gains no
// privilege: the same helper cannot become root, and nothing of the
// command can refuse the guardian.
func TestCLISetuidGainsNothingInTheNamespace(t *testing.T) {
	t.Parallel()
	setpriv, helper, out := setuidHelper(t)
	cmd := cliCommand(t, shared.Endpoints()[0], []string{"H=" + helper, "D=" + out}, "run", "job", "--containment", "pid-namespace", "--shell", "--",
		`"$H" --reuid=0 --regid=0 --clear-groups id -u > "$D/uid" 2> "$D/err"; id -u > "$D/self"`)
	cmd.Args = append([]string{setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"}, cmd.Args...)
	cmd.Path = setpriv
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("etcdlock: %v; stderr:\n%s", err, stderr)
	}
	uid, _ := os.ReadFile(filepath.Join(out, "uid"))
	self, _ := os.ReadFile(filepath.Join(out, "self"))
	if strings.TrimSpace(string(uid)) == "0" || strings.TrimSpace(string(self)) != "65534" {
		t.Errorf("in the namespace the setuid helper ran as %q and the command as %q, want no root and 65534", uid, self)
	}
}

// setuidHelper prepares, for a test run as root that runs etcdlock as
// nobody: setpriv's path, a setuid-root copy of it, and a directory every
// user may write (the command's D).
func setuidHelper(t *testing.T) (setpriv, helper, out string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test runs etcdlock as nobody with a setuid-root helper: run it as root")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatalf("setpriv (util-linux) is needed: %v", err)
	}
	dir := t.TempDir()
	helper = filepath.Join(dir, "setpriv-root")
	b, err := os.ReadFile(setpriv)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(helper, b, 0o755); err != nil {
		t.Fatal(err)
	}
	// Everything nobody needs: the binary's directory, the test's.
	for _, p := range []string{filepath.Dir(cliPath), filepath.Dir(dir), dir} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(helper, os.ModeSetuid|0o755); err != nil {
		t.Fatal(err)
	}
	out = filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(out, 0o777); err != nil {
		t.Fatal(err)
	}
	return setpriv, helper, out
}
