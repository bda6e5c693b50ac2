//go:build linux

package guardian

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/etcdlock/etcdlock/cmd/internal/exitcode"
)

// The test binary is its own guardian: Start re-executes /proc/self/exe.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == Command {
		noWake = os.Getenv("GUARDIAN_TEST_NO_WAKE") != "" // the negative control of TestStoppedGuardianStopsAtItsDeadline
		os.Exit(Main(os.Stderr))
	}
	// The race detector sleeps a second at every exit of an instrumented
	// binary; the guardians this test binary starts are such binaries.
	os.Setenv("GORACE", "atexit_sleep_ms=0")
	goleak.VerifyTestMain(m)
}

// syncBuffer is a bytes.Buffer that the guardian's stderr copier and the
// test may use at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type run struct {
	t      *testing.T
	g      *Guardian
	stderr *syncBuffer
	dir    string
	pid    int // the command's, as the guardian sees it
}

// containments are the ways a guardian holds the command; a test of how
// it stops the command runs under each (eachContainment).
var containments = []Containment{ContainNamespace, ContainTree}

// eachContainment runs test as a subtest for each containment.
func eachContainment(t *testing.T, test func(t *testing.T, c Containment)) {
	for _, c := range containments {
		t.Run(c.String(), func(t *testing.T) { test(t, c) })
	}
}

// start runs script under a guardian with the given deadlines from now.
func start(t *testing.T, c Containment, script string, grace, soft, hard time.Duration) *run {
	t.Helper()
	r := &run{t: t, stderr: &syncBuffer{}, dir: t.TempDir()}
	// The deadlines count from when the guardian is ready, not from its
	// start-up, which a loaded machine may stretch past readyWithin: the
	// tests are about what follows.
	g, err := Spawn(Stdio{Stdout: os.Stdout, Stderr: r.stderr}, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.p.awaitReady(time.Minute); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	err = g.Run(Config{
		Argv:       []string{"/bin/sh", "-c", script},
		Env:        append(os.Environ(), "DIR="+r.dir),
		KillSignal: syscall.SIGTERM,
		KillGrace:  grace,
		Soft:       now.Add(soft),
		Hard:       now.Add(hard),
	})
	if err != nil {
		t.Fatal(err)
	}
	r.g = g
	t.Cleanup(func() {
		_ = g.Stop("test cleanup", 0)
		for range g.Events() {
		}
	})
	ev := <-g.Events()
	if ev.Started == 0 {
		t.Fatalf("first event %+v, want Started; stderr: %s", ev, r.stderr)
	}
	r.pid = ev.Started
	return r
}

// lastDeadline sends the guardian deadlines soft and hard from now, the
// last it gets, and returns now. Tests of what a deadline does start the
// command with deadlines an hour away and call it once the command has
// set itself up, which a loaded machine may take seconds to do.
func (r *run) lastDeadline(soft, hard time.Duration) time.Time {
	r.t.Helper()
	now := time.Now()
	if err := r.g.SetDeadline(now.Add(soft), now.Add(hard)); err != nil {
		r.t.Fatal(err)
	}
	return now
}

// command is the command's pid as this process sees it; it must be alive.
func (r *run) command() int { return r.host([]int{r.pid})[0] }

// host maps pids the command sees to this process's: in a PID namespace
// they are the namespace's. Each must be alive.
func (r *run) host(pids []int) []int {
	r.t.Helper()
	if !r.g.p.ns {
		return pids
	}
	return hostPIDs(r.t, r.g.p.cmd.Process.Pid, pids)
}

// hostPIDs maps pids of the PID namespace whose first process is first
// (as this process sees it) to this process's pids. Each must be alive.
func hostPIDs(t *testing.T, first int, pids []int) []int {
	t.Helper()
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", first))
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	byInner := map[int]int{}
	for _, e := range ents {
		if l, _ := os.Readlink("/proc/" + e.Name() + "/ns/pid"); l != ns {
			continue
		}
		b, _ := os.ReadFile("/proc/" + e.Name() + "/status")
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "NSpid:" {
				inner, _ := strconv.Atoi(f[len(f)-1])
				outer, _ := strconv.Atoi(e.Name())
				byInner[inner] = outer
			}
		}
	}
	out := make([]int, len(pids))
	for i, p := range pids {
		h, ok := byInner[p]
		if !ok {
			t.Fatalf("no process %d in the namespace of %d", p, first)
		}
		out[i] = h
	}
	return out
}

// exited waits for the Exited event and the guardian's exit, and returns
// the code and when the event came.
func (r *run) exited(timeout time.Duration) (int, time.Time) {
	r.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-r.g.Events():
			if !ok {
				r.t.Fatalf("guardian exited without reporting (%v); stderr: %s", r.g.Err(), r.stderr)
			}
			if ev.Exited {
				at := time.Now()
				for range r.g.Events() {
				}
				return ev.Code, at
			}
		case <-deadline:
			r.t.Fatalf("no exit within %v; stderr: %s", timeout, r.stderr)
		}
	}
}

// waitFor polls cond until it holds, failing t with msg after 10 s.
func waitFor(t *testing.T, msg string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s within 10s", msg)
		}
	}
}

// pids waits for the file $DIR/name with one pid per word.
func (r *run) pids(name string, n int) []int {
	r.t.Helper()
	end := time.Now().Add(10 * time.Second)
	for time.Now().Before(end) {
		b, err := os.ReadFile(filepath.Join(r.dir, name))
		if f := strings.Fields(string(b)); err == nil && len(f) >= n {
			var out []int
			for _, s := range f[:n] {
				p, err := strconv.Atoi(s)
				if err != nil {
					r.t.Fatalf("%s: %v", name, err)
				}
				out = append(out, p)
			}
			return r.host(out)
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.t.Fatalf("%s not written; stderr: %s", name, r.stderr)
	return nil
}

func alive(pid int) bool {
	p, ok := readProc(pid)
	return ok && !p.zombie
}

func assertDead(t *testing.T, pids []int) {
	t.Helper()
	for _, p := range pids {
		if alive(p) {
			t.Errorf("process %d still alive", p)
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
}

// hasChildren, which spares the guardian a walk of /proc when the command
// left nothing, sees a child whether it runs or has exited unreaped.
func TestHasChildrenSeesLiveAndExitedChildren(t *testing.T) {
	p, err := os.StartProcess("/bin/sleep", []string{"sleep", "30"}, &os.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	if !hasChildren() {
		t.Error("hasChildren is false with a running child")
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the child never became a zombie", func() bool {
		q, ok := readProc(p.Pid)
		return ok && q.zombie
	})
	if !hasChildren() {
		t.Error("hasChildren is false with an exited, unreaped child")
	}
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
}

// escapes starts, in the background, a plain child, one that left the
// group with setsid, and one whose parent exited (double fork), and
// writes their pids to $DIR/pids.
const escapes = `sleep 30 & a=$!
setsid sleep 31 & b=$!
(sleep 32 & echo $! > "$DIR/c") ; c=$(cat "$DIR/c")
echo "$a $b $c" > "$DIR/pids.tmp"; mv "$DIR/pids.tmp" "$DIR/pids"
`

func TestNormalExitStopsEverythingTheCommandLeft(t *testing.T) {
	eachContainment(t, func(t *testing.T, c Containment) {
		// The command exits once the test has found its leftovers.
		r := start(t, c, escapes+`while [ ! -e "$DIR/go" ]; do sleep 0.01; done; exit 3`, 10*time.Second, time.Hour, time.Hour)
		pids := r.pids("pids", 3)
		if err := os.WriteFile(filepath.Join(r.dir, "go"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		code, _ := r.exited(10 * time.Second)
		if code != 3 {
			t.Errorf("code %d, want the command's 3", code)
		}
		assertDead(t, pids)
		if !strings.Contains(r.stderr.String(), "left 3 processes running") {
			t.Errorf("stderr does not report the leftovers: %q", r.stderr)
		}
	})
}

func TestNormalExitWithNothingLeftIsQuiet(t *testing.T) {
	r := start(t, ContainAuto, "exit 0", 10*time.Second, time.Hour, time.Hour)
	if code, _ := r.exited(10 * time.Second); code != 0 {
		t.Errorf("code %d, want 0", code)
	}
	if s := r.stderr.String(); s != "" {
		t.Errorf("stderr %q, want nothing", s)
	}
}

// The supervisor's end of the control pipe closes (it died): everything
// below the guardian is stopped at once, by the kill signal. None of the
// processes ignores it, so all are gone well before the grace period
// ends; one that is still there at its end got no SIGTERM, and SIGKILL
// ended it.
func TestSupervisorGoneStopsEverything(t *testing.T) {
	eachContainment(t, func(t *testing.T, c Containment) {
		// A grace period no loaded machine takes to deliver SIGTERM and
		// reap: a process still there at its end missed the signal.
		const grace = 30 * time.Second
		r := start(t, c, escapes+"wait", grace, time.Hour, time.Hour)
		pids := append(r.pids("pids", 3), r.command())
		gone := time.Now()
		r.g.p.ctrl.Close()
		_, at := r.exited(2 * grace)
		assertDead(t, pids)
		took := at.Sub(gone)
		t.Logf("supervisor gone → every process dead and reaped in %v", took)
		if took >= grace {
			t.Errorf("every process gone after %v, not before the %v grace period ended: a process missed SIGTERM; stderr: %s", took, grace, r.stderr)
		}
		if !strings.Contains(r.stderr.String(), "etcdlock exited") {
			t.Errorf("stderr does not say why: %q", r.stderr)
		}
	})
}

// No fresh deadline arrives (the supervisor is frozen): the command gets
// SIGTERM at the soft deadline and, as it ignores it, SIGKILL at the hard
// one — though the grace period is longer.
func TestDeadlinePassesWithoutRenewal(t *testing.T) {
	eachContainment(t, func(t *testing.T, c Containment) {
		const soft, hard = time.Second, 1500 * time.Millisecond
		r := start(t, c, `trap '' TERM; `+escapes+`while :; do sleep 0.01; done`, time.Hour, time.Hour, time.Hour)
		pids := append(r.pids("pids", 3), r.command())
		begin := r.lastDeadline(soft, hard)
		code, at := r.exited(10 * time.Second)
		assertDead(t, pids)
		if code != exitcode.SignalBase+int(syscall.SIGKILL) {
			t.Errorf("code %d, want %d (SIGKILL)", code, exitcode.SignalBase+int(syscall.SIGKILL))
		}
		took := at.Sub(begin)
		t.Logf("soft deadline %v, hard %v: every process dead and reaped at %v", soft, hard, took)
		if took < soft {
			t.Errorf("stopped at %v, before the soft deadline %v", took, soft)
		}
		if !strings.Contains(r.stderr.String(), "no lease renewal") || !strings.Contains(r.stderr.String(), "SIGKILL") {
			t.Errorf("stderr does not explain: %q", r.stderr)
		}
	})
}

// The guardian is killed with SIGKILL and no supervisor acts on it: in a
// PID namespace the kernel kills every process of the command, however it
// left the command's group; in the process tree they run on (the control
// that shows the check can fail: there the supervisor's Kill is what
// stops them).
func TestGuardianKilledAlone(t *testing.T) {
	eachContainment(t, func(t *testing.T, c Containment) {
		r := start(t, c, `trap '' TERM HUP INT; `+escapes+"wait", time.Hour, time.Hour, time.Hour)
		pids := append(r.pids("pids", 3), r.command())
		t.Cleanup(func() {
			for _, p := range pids {
				if syscall.Kill(p, syscall.SIGKILL) == nil {
					var ws unix.WaitStatus
					_, _ = unix.Wait4(p, &ws, 0, nil) // this process, a subreaper, inherited it
				}
			}
		})
		guardian := r.g.p.cmd.Process.Pid
		if err := r.g.p.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		// A guardian that is the first process of a namespace can be
		// reaped (Events closes) only once every process in it is gone. In
		// the tree, the survivors hold its stderr pipe, which keeps Events
		// open: there the guardian's exit is enough.
		if c == ContainNamespace {
			for range r.g.Events() {
			}
		} else {
			waitFor(t, "the guardian never exited", func() bool {
				p, ok := readProc(guardian)
				return !ok || p.zombie
			})
		}
		var left []int
		for _, p := range pids {
			if alive(p) {
				left = append(left, p)
			}
		}
		switch {
		case c == ContainNamespace && len(left) > 0:
			t.Errorf("processes %v outlived the guardian of their PID namespace", left)
		case c == ContainTree && len(left) == 0:
			t.Errorf("every process died with the guardian in the process tree: the check cannot tell")
		}
	})
}

// The guardian is stopped (SIGSTOP) and nobody continues it: it continues
// itself at the deadline and stops the command, which ignores SIGTERM, by
// SIGKILL at the hard deadline. With its wake timer off (the control) the
// command runs on while the guardian stays stopped.
func TestStoppedGuardianStopsAtItsDeadline(t *testing.T) {
	for _, wake := range []bool{true, false} {
		t.Run(fmt.Sprintf("wake=%v", wake), func(t *testing.T) {
			if !wake {
				t.Setenv("GUARDIAN_TEST_NO_WAKE", "1")
			}
			const soft, hard = time.Second, 1500 * time.Millisecond
			r := start(t, ContainAuto, `trap '' TERM; `+escapes+`while :; do sleep 0.01; done`, time.Hour, soft, hard)
			pids := append(r.pids("pids", 3), r.command())
			guardian := r.g.p.cmd.Process.Pid
			if err := syscall.Kill(guardian, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = syscall.Kill(guardian, syscall.SIGCONT) })
			if !wake {
				time.Sleep(hard + time.Second) // the fault: stopped past both deadlines
				var left []int
				for _, p := range pids {
					if alive(p) {
						left = append(left, p)
					}
				}
				if len(left) == 0 {
					t.Errorf("the command died with the guardian stopped and its wake timer off: the check cannot tell")
				}
				return
			}
			code, _ := r.exited(10 * time.Second)
			assertDead(t, pids)
			if code != exitcode.SignalBase+int(syscall.SIGKILL) {
				t.Errorf("code %d, want %d (SIGKILL); stderr: %s", code, exitcode.SignalBase+int(syscall.SIGKILL), r.stderr)
			}
		})
	}
}

// Fresh deadlines keep the command running past the first one.
func TestRenewedDeadlineKeepsTheCommand(t *testing.T) {
	// Deadlines a second ahead, renewed every 50 ms, for a command that runs
	// two seconds: only a stall of a second on this machine could end it.
	r := start(t, ContainAuto, `sleep 2; exit 4`, time.Hour, time.Second, 1500*time.Millisecond)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				now := time.Now()
				_ = r.g.SetDeadline(now.Add(time.Second), now.Add(1500*time.Millisecond))
			}
		}
	})
	code, _ := r.exited(10 * time.Second)
	close(stop)
	wg.Wait()
	if code != 4 {
		t.Errorf("code %d, want the command's own 4; stderr: %s", code, r.stderr)
	}
}

func TestStopAndSignal(t *testing.T) {
	t.Run("stop", func(t *testing.T) {
		eachContainment(t, func(t *testing.T, c Containment) {
			r := start(t, c, escapes+"wait", time.Hour, time.Hour, time.Hour)
			pids := append(r.pids("pids", 3), r.command())
			if err := r.g.Stop("lock lost", time.Hour); err != nil {
				t.Fatal(err)
			}
			code, _ := r.exited(10 * time.Second)
			assertDead(t, pids)
			if code != exitcode.SignalBase+int(syscall.SIGTERM) {
				t.Errorf("code %d, want %d", code, exitcode.SignalBase+int(syscall.SIGTERM))
			}
			if !strings.Contains(r.stderr.String(), "lock lost: sent SIGTERM") {
				t.Errorf("stderr: %q", r.stderr)
			}
		})
	})
	t.Run("signal", func(t *testing.T) {
		r := start(t, ContainAuto, `trap 'exit 9' USR1; touch "$DIR/ready"; while :; do sleep 0.01; done`, time.Hour, time.Hour, time.Hour)
		waitFor(t, "the command never set its trap", func() bool {
			_, err := os.Stat(filepath.Join(r.dir, "ready"))
			return err == nil
		})
		if err := r.g.Signal(syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		if code, _ := r.exited(10 * time.Second); code != 9 {
			t.Errorf("code %d, want 9 from the trap", code)
		}
	})
}

func TestCommandThatCannotStart(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		code int
	}{
		{[]string{"/nonexistent/command"}, exitcode.NotFound},
		{[]string{"no-such-command-in-path"}, exitcode.NotFound},
		{[]string{"/etc/hostname"}, exitcode.CannotExecute}, // not executable
		{[]string{""}, exitcode.CannotExecute},
	} {
		stderr := &syncBuffer{}
		g, err := Start(Stdio{Stderr: stderr}, Config{Argv: tc.argv, Env: os.Environ(), KillSignal: syscall.SIGTERM,
			Soft: time.Now().Add(time.Hour), Hard: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		var got []Event
		for ev := range g.Events() {
			got = append(got, ev)
		}
		if len(got) != 1 || !got[0].Exited || got[0].Code != tc.code {
			t.Errorf("%v: events %+v, want one exit with %d", tc.argv, got, tc.code)
		}
		// The error reads as os/exec's.
		want := "cannot start " + tc.argv[0] + ": " + exec.Command(tc.argv[0], tc.argv[1:]...).Start().Error()
		if len(got) == 1 && got[0].StartError != want {
			t.Errorf("%v: start error %q, want %q", tc.argv, got[0].StartError, want)
		}
	}
}

func TestBadConfig(t *testing.T) {
	if _, err := Start(Stdio{}, Config{}); err == nil {
		t.Error("Start without a command succeeded")
	}
	now := time.Now()
	if _, err := Start(Stdio{}, Config{Argv: []string{"true"}, Soft: now.Add(time.Second), Hard: now}); err == nil {
		t.Error("Start with the hard deadline before the soft one succeeded")
	}
	var stderr bytes.Buffer
	t.Setenv(EnvMarker, "")
	if code := Main(&stderr); code != exitcode.Usage || !strings.Contains(stderr.String(), "not by hand") {
		t.Errorf("Main by hand: %d %q", code, stderr.String())
	}
}

// below must see through setsid and reparenting: a negative control for
// the tree walk that the tests above rely on.
func TestBelowFindsDescendants(t *testing.T) {
	if got := below(os.Getpid()); len(got) != 0 {
		t.Fatalf("below(test) = %v before starting anything", got)
	}
	p, grand := startSetsidChild(t)
	got := below(os.Getpid())
	if len(got) != 2 || !isBelow(grand, os.Getpid()) {
		t.Errorf("below = %v, want the shell %d and its setsid child %d", got, p.Pid, grand)
	}
}

// A process whose parent exits while the tree is walked moves up to the
// subreaper, after the walk read the subreaper's children and before it
// read the parent's: below must find it all the same. The hook makes the
// parent exit at that moment, as the kill signal to the command's group
// can under load; stopAll then missed the setsid child of the shell.
func TestBelowFindsAProcessThatMovesUpDuringTheWalk(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Skipf("cannot become a child subreaper: %v", err)
	}
	t.Cleanup(func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) })
	var grand int
	t.Cleanup(func() { // after startSetsidChild's cleanup killed it: it is ours now
		var ws unix.WaitStatus
		_, _ = unix.Wait4(grand, &ws, 0, nil)
	})
	shell, grand := startSetsidChild(t)
	exited := false
	walkHook = func(pid int) {
		if pid != shell.Pid || exited {
			return
		}
		exited = true
		_ = shell.Kill()
		waitFor(t, "the shell never exited", func() bool {
			p, ok := readProc(pid)
			return !ok || p.zombie
		})
	}
	t.Cleanup(func() { walkHook = nil })
	got := below(os.Getpid())
	if !exited {
		t.Fatalf("the walk never reached the shell %d; below = %v", shell.Pid, got)
	}
	if !slices.Contains(got, grand) {
		t.Errorf("below = %v, without %d, whose parent exited during the walk", got, grand)
	}
}

// startSetsidChild starts a shell below the test process whose child calls
// setsid, and returns the shell and that child's pid. Both are killed and
// the shell reaped when the test ends.
func startSetsidChild(t *testing.T) (shell *os.Process, grand int) {
	t.Helper()
	dir := t.TempDir()
	c := fmt.Sprintf(`setsid sleep 30 & echo $! > %s/p; wait`, dir)
	p, err := os.StartProcess("/bin/sh", []string{"sh", "-c", c}, &os.ProcAttr{Files: []*os.File{nil, os.Stdout, os.Stderr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The child first: killed after the shell, it could have moved
		// out of the tree, to init, before signalBelow got to it.
		if grand > 0 {
			_ = syscall.Kill(grand, syscall.SIGKILL) // not reaped before the shell waits for it: the pid is its own
		}
		signalBelow(os.Getpid(), syscall.SIGKILL)
		_, _ = p.Wait()
	})
	waitFor(t, "the shell never wrote its child's pid", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "p"))
		grand, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return grand != 0
	})
	return p, grand
}

// The command gets stdin, stdout and stderr, not the guardian's pipes, and
// not the guardian's marker.
func TestCommandInheritsNoPipes(t *testing.T) {
	r := start(t, ContainAuto, `readlink /proc/$$/fd/3 /proc/$$/fd/4 > "$DIR/fds"; env > "$DIR/env"`, time.Hour, time.Hour, time.Hour)
	r.exited(10 * time.Second)
	if b, _ := os.ReadFile(filepath.Join(r.dir, "fds")); len(b) > 0 {
		t.Errorf("the command holds descriptors 3 or 4: %s", b)
	}
	if env, _ := os.ReadFile(filepath.Join(r.dir, "env")); strings.Contains(string(env), EnvMarker) {
		t.Errorf("command environment has %s", EnvMarker)
	}
}

// The command's environment is the one given, the supervisor's when none
// is: never the guardian's own, which has the marker and GOMAXPROCS=1.
func TestCommandEnvironment(t *testing.T) {
	t.Setenv("ETCDLOCK_TEST_VAR", "from the supervisor")
	want := "ETCDLOCK_TEST_VAR=from the supervisor\nGOMAXPROCS=" + os.Getenv("GOMAXPROCS") + "\n"
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"none given", nil, want},
		{"empty", []string{}, "ETCDLOCK_TEST_VAR=\nGOMAXPROCS=\n"},
		{"given", []string{"ETCDLOCK_TEST_VAR=given"}, "ETCDLOCK_TEST_VAR=given\nGOMAXPROCS=\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "env")
			g, err := Start(Stdio{Stderr: os.Stderr}, Config{
				Argv: []string{"/bin/sh", "-c", `echo "ETCDLOCK_TEST_VAR=$ETCDLOCK_TEST_VAR" > ` + out + `; echo "GOMAXPROCS=$GOMAXPROCS" >> ` + out + `; env | grep -c ` + EnvMarker + ` >> ` + out},
				Env:  tc.env, KillSignal: syscall.SIGTERM, Soft: time.Now().Add(time.Hour), Hard: time.Now().Add(time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			for range g.Events() {
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(b); got != tc.want+"0\n" {
				t.Errorf("the command saw\n%s\nwant\n%s0", got, tc.want)
			}
		})
	}
}

// A walker's later passes find what was forked since its first, which
// reads all of /proc where the kernel has no children files; the later
// ones read only the pids allocated since.
func TestWalkerFindsNewProcesses(t *testing.T) {
	w := &walker{root: os.Getpid()}
	if got := w.pass(); len(got) != 0 {
		t.Fatalf("first pass = %v before starting anything", got)
	}
	p, grand := startSetsidChild(t)
	got := w.pass()
	if !slices.Contains(got, p.Pid) || !slices.Contains(got, grand) || len(got) != 2 {
		t.Errorf("second pass = %v, want the shell %d and its setsid child %d", got, p.Pid, grand)
	}
}

// The guardian blocks SIGTTOU and SIGTTIN for its own writes to the
// terminal; the command must get neither blocked nor ignored, or a
// background command writing or reading the terminal would not stop.
// The shell execs grep, which reads its own mask, the shell's as the
// guardian started it: dash rewrites its mask as it forks (it blocks
// every signal for a moment, and clears the mask after).
func TestCommandGetsTerminalStops(t *testing.T) {
	r := start(t, ContainAuto, `exec grep -E '^Sig(Blk|Ign)' /proc/self/status > "$DIR/sig"`, time.Hour, time.Hour, time.Hour)
	r.exited(10 * time.Second)
	b, err := os.ReadFile(filepath.Join(r.dir, "sig"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		name, hex, _ := strings.Cut(line, ":")
		mask, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		for _, sig := range []syscall.Signal{syscall.SIGTTOU, syscall.SIGTTIN} {
			if mask&(1<<(sig-1)) != 0 {
				t.Errorf("%s has %v in the command", name, sig)
			}
		}
	}
}

// Processes that refuse SIGKILL (they changed user id) are reported once,
// and the SIGKILL phase backs off to deniedEvery instead of spinning
// every reapEvery; it speeds up again when none refuses.
func TestRefusedBacksOff(t *testing.T) {
	var out syncBuffer
	g := &guard{notes: newNotes(&out), killing: true, killEvery: reapEvery}
	for range 20 {
		g.refused([]int{4242})
	}
	if g.killEvery != deniedEvery || g.nextWake() != deniedEvery {
		t.Errorf("period %v, next wake %v; want %v", g.killEvery, g.nextWake(), deniedEvery)
	}
	g.refused(nil)
	if g.nextWake() != reapEvery {
		t.Errorf("next wake %v after the refusal ended, want %v", g.nextWake(), reapEvery)
	}
	g.notes.Close(time.Minute)
	if n := strings.Count(out.String(), "cannot be signalled (pid [4242])"); n != 1 {
		t.Errorf("refusal reported %d times, want once:\n%s", n, out.String())
	}
}
