//go:build linux

package integration

import (
	"bytes"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The three ways both of a run's supervisors can fail at once, each in 10
// trials run side by side (a lock name each): the command leaves a
// TERM-ignoring plain child, a setsid child and a double-forked daemon, and
// a second holder waiting on its own connection records which of them are
// alive the moment it gets the lock. None may be.

const containTrials = 10

// trials runs trial containTrials times in parallel subtests.
func trials(t *testing.T, trial func(t *testing.T)) {
	for i := range containTrials {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			trial(t)
		})
	}
}

// kill -9 of etcdlock and its guardian together, as `pkill -9 etcdlock`
// does: the guardian is the first process of the command's PID namespace,
// whose death makes the kernel kill every process in it. With
// --containment process-tree (the control) they outlive both.
func TestCLIBothSupervisorsKilled(t *testing.T) {
	t.Parallel()
	for _, contain := range []string{"pid-namespace", "process-tree"} {
		t.Run(contain, func(t *testing.T) {
			trials(t, func(t *testing.T) {
				// A TTL a loaded machine renews in time: the run must still
				// hold the lock when the test kills it.
				g := runGuarded(t, shared.Endpoints()[0], "trap '' TERM HUP INT\n"+leaveBehind+"wait", "--ttl", "5s", "--containment", contain)
				next := nextHolder(t, g)
				guardian := g.guardianOf(t)
				for _, p := range []int{g.cmd.Process.Pid, guardian} {
					if err := syscall.Kill(p, syscall.SIGKILL); err != nil {
						t.Fatal(err)
					}
				}
				h := <-next
				if contain == "process-tree" {
					if len(h.alive) == 0 {
						t.Errorf("no process outlived both supervisors in the process tree: the check cannot tell")
					}
					return
				}
				h.check(t)
			})
		})
	}
}

// kill -STOP of etcdlock and its guardian together: a kernel timer
// continues the guardian at its deadline, and it stops the command before
// etcd can expire the lease.
func TestCLIBothSupervisorsFrozen(t *testing.T) {
	t.Parallel()
	trials(t, func(t *testing.T) {
		g := runGuarded(t, shared.Endpoints()[0], "trap '' TERM HUP INT\n"+leaveBehind+"wait", "--ttl", "2s")
		next := nextHolder(t, g)
		guardian := g.guardianOf(t)
		t.Cleanup(func() { _ = syscall.Kill(guardian, syscall.SIGKILL) })
		for _, p := range []int{g.cmd.Process.Pid, guardian} {
			if err := syscall.Kill(p, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
		}
		h := <-next
		h.check(t)
	})
}

var tokenRE = regexp.MustCompile(`\(token (\d+)`)

// tokenOf is the token of job's holder, from etcdlock status.
func tokenOf(t *testing.T, ep string) string {
	t.Helper()
	st := cli(t, ep, nil, "status", "job")
	m := tokenRE.FindStringSubmatch(st.stdout)
	if m == nil {
		t.Fatalf("status: %q", st.stdout)
	}
	return m[1]
}

// etcdlock break asks the holder, which stops its whole command — here
// processes that ignore SIGTERM, killed when --kill-grace ends — and only
// then releases: the next holder never sees one of them alive. break says
// the holder released, and the run exits 79.
func TestCLIBreakStopsTheHolderFirst(t *testing.T) {
	t.Parallel()
	trials(t, func(t *testing.T) {
		ep := shared.Endpoints()[0]
		g := runGuarded(t, ep, "trap '' TERM HUP INT\n"+leaveBehind+"wait", "--kill-grace", "300ms")
		next := nextHolder(t, g)
		r := cli(t, ep, nil, "break", "job", "--token", tokenOf(t, ep))
		if r.code != 0 || !strings.Contains(r.stdout, "let go of it") {
			t.Fatalf("break: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		h := <-next
		h.check(t)
		if err := g.cmd.Wait(); exitCodeOf(err) != 79 {
			t.Errorf("the broken run: %v, want exit 79; stderr:\n%s", err, g.stderr)
		}
		if !strings.Contains(g.stderr.String(), "break requested") {
			t.Errorf("the broken run does not say why it stopped:\n%s", g.stderr)
		}
	})
}

// A run of two names asked to release one of them keeps both until its
// command is stopped: the next holder of the other name never starts
// beside it either.
func TestCLIBreakOfASetStopsItFirst(t *testing.T) {
	t.Parallel()
	trials(t, func(t *testing.T) {
		ep := shared.Endpoints()[0]
		g := runGuardedOn(t, ep, nil, []string{"job", "other"}, "trap '' TERM HUP INT\n"+leaveBehind+"wait", "--kill-grace", "300ms")
		next := nextHolderOf(t, g, "other")
		if r := cli(t, ep, nil, "break", "job", "--token", tokenOf(t, ep)); r.code != 0 {
			t.Fatalf("break: exit %d, stderr %q", r.code, r.stderr)
		}
		h := <-next
		h.check(t)
	})
}

// A holder that has not released when break's wait ends (here at once) is
// fenced: its lease is revoked and its key kept until it has stopped
// everything and released, so the next holder still never starts beside
// its processes.
func TestCLIBreakFencesAHolderThatCannotStop(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	g := runGuarded(t, ep, "trap '' TERM HUP INT\n"+leaveBehind+"wait", "--ttl", "3s")
	next := nextHolder(t, g)
	r := cli(t, ep, nil, "break", "job", "--token", tokenOf(t, ep), "--wait", "1ms")
	if r.code != 0 {
		t.Fatalf("break: exit %d, stderr %q", r.code, r.stderr)
	}
	h := <-next
	h.check(t)
}

// break --force deletes the key at once: the next holder may start while
// the broken holder's processes still die (here they ignore SIGTERM and
// get SIGKILL at once, as a deleted key leaves no grace).
func TestCLIBreakForce(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	g := runGuarded(t, ep, "trap '' TERM HUP INT\n"+leaveBehind+"wait")
	next := nextHolder(t, g)
	r := cli(t, ep, nil, "break", "job", "--token", tokenOf(t, ep), "--force")
	if r.code != 0 || !strings.Contains(r.stdout, "removed: key deleted") {
		t.Fatalf("break --force: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if h := <-next; h.err != nil {
		t.Fatal(h.err)
	}
	g.deadAt(t, 10*time.Second)
	if err := g.cmd.Wait(); exitCodeOf(err) != 79 {
		t.Errorf("the broken run: %v, want exit 79", err)
	}
}

// Where the system refuses PID namespaces (here root without capabilities
// in a user namespace that may create none, the case of a container
// without CAP_SYS_ADMIN), auto runs
// the command in the process tree with a one-line note saying why, and
// pid-namespace refuses to run it: a configuration error (78).
func TestCLIContainmentRefused(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Fatalf("unshare (util-linux) is needed: %v", err)
	}
	refused := func(args ...string) *exec.Cmd {
		cmd := cliCommand(t, shared.Endpoints()[0], nil, args...)
		cmd.Args = append([]string{"unshare", "--user", "--map-root-user", "sh", "-c",
			`echo 0 > /proc/sys/user/max_user_namespaces && exec setpriv --inh-caps=-all --bounding-set=-all "$@"`, "sh"}, cmd.Args...)
		cmd.Path, _ = exec.LookPath("unshare")
		return cmd
	}
	var stderr bytes.Buffer
	auto := refused("run", "job", "--", "true")
	auto.Stderr = &stderr
	if err := auto.Run(); err != nil || !strings.Contains(stderr.String(), "without a PID namespace (the system refused one") {
		t.Errorf("auto where namespaces are refused: %v, stderr %q; want exit 0 and the note", err, stderr.String())
	}
	stderr.Reset()
	strict := refused("run", "--containment", "pid-namespace", "job", "--", "true")
	strict.Stderr = &stderr
	if err := strict.Run(); exitCodeOf(err) != 78 || !strings.Contains(stderr.String(), "no PID namespace") {
		t.Errorf("pid-namespace where namespaces are refused: %v, stderr %q; want exit 78", err, stderr.String())
	}
}
