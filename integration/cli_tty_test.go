//go:build linux

package integration

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
)

// The terminal tests' own harness lives here (a pseudo-terminal and an
// interactive shell on it); the helpers all suites share are in
// helpers_test.go.

// interactiveShell is bash with job control on a terminal, at its prompt.
func interactiveShell(t *testing.T) *terminal {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatalf("bash is needed for job control: %v", err)
	}
	sh := exec.Command("bash", "--norc", "--noprofile", "-i")
	sh.Env = append(cleanEnv(), "PS1=$ ", "TERM=dumb")
	term := onTerminal(t, sh)
	term.expect("$ ", 10*time.Second)
	return term
}

// typeEtcdlock types an etcdlock command line (args in shell syntax) with
// the test's endpoint and prefix.
func (term *terminal) typeEtcdlock(args string) {
	term.send(cliPath + " --endpoints " + shared.Endpoints()[0] + " --prefix " + prefixOf(term.t) + " " + args + "\n")
}

// A terminal session: a command on a pseudo-terminal, its output
// collected for expect.
type terminal struct {
	t    *testing.T
	tty  *os.File
	out  *lockedBuffer
	cmd  *exec.Cmd
	done chan struct{} // closed when the output copier ends
}

// onTerminal starts cmd as the session leader of a new pseudo-terminal,
// so that its process group has the terminal, as a shell's job would.
func onTerminal(t *testing.T, cmd *exec.Cmd) *terminal {
	t.Helper()
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 24, Cols: 200})
	if err != nil {
		t.Fatal(err)
	}
	term := &terminal{t: t, tty: tty, out: &lockedBuffer{}, cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(term.done)
		_, _ = io.Copy(term.out, tty) // ends with EIO once every process has closed the terminal
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		tty.Close()
		<-term.done
	})
	return term
}

func (term *terminal) send(s string) {
	term.t.Helper()
	if _, err := term.tty.WriteString(s); err != nil {
		term.t.Fatal(err)
	}
}

// expect waits until the output holds want.
func (term *terminal) expect(want string, within time.Duration) {
	term.t.Helper()
	term.out.waitFor(term.t, want, within)
}

// diedOf waits for the command and returns the signal that killed it, 0
// if it exited.
func (term *terminal) diedOf() syscall.Signal {
	term.t.Helper()
	err := term.cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws := ee.Sys().(syscall.WaitStatus); ws.Signaled() {
			return ws.Signal()
		}
		return 0
	}
	if err != nil {
		term.t.Fatal(err)
	}
	return 0
}

func (term *terminal) exitCode() int {
	term.t.Helper()
	err := term.cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	term.t.Fatal(err)
	return -1
}

// A command that reads the terminal gets what is typed: it is in the
// terminal's foreground group (a background group would be stopped by
// SIGTTIN at the read).
func TestCLITerminalReadsInput(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	term := onTerminal(t, cliCommand(t, ep, nil, "run", "job", "--", "sh", "-c", `echo ready; read x; echo "got:$x"`))
	term.expect("ready", 20*time.Second)
	term.send("hello\n")
	term.expect("got:hello", 10*time.Second)
	if code := term.exitCode(); code != 0 {
		t.Errorf("exit %d, want 0; output:\n%s", code, term.out)
	}
}

// Ctrl-C reaches the command as it would without etcdlock — from the
// terminal, not forwarded by etcdlock — and etcdlock releases the lock and
// dies of SIGINT, as the command did.
func TestCLITerminalInterrupt(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	term := onTerminal(t, cliCommand(t, ep, nil, "--log-level", "info", "run", "job", "--", "sh", "-c", `echo ready; exec sleep 30`))
	term.expect("ready", 20*time.Second)
	term.send("\x03")
	if sig := term.diedOf(); sig != syscall.SIGINT {
		t.Errorf("etcdlock died of %v, want SIGINT; output:\n%s", sig, term.out)
	}
	if strings.Contains(term.out.String(), "forwarding signal") {
		t.Errorf("etcdlock received the terminal's SIGINT (its group had the terminal):\n%s", term.out)
	}
	if r := cli(t, ep, nil, "status", "job"); !strings.Contains(r.stdout, "free") {
		t.Errorf("lock not released: %q", r.stdout)
	}
}

// Under an interactive shell, Ctrl-Z stops the job and gives the prompt
// back; fg resumes the command with the terminal; Ctrl-C then ends it.
func TestCLITerminalJobControl(t *testing.T) {
	t.Parallel()
	term := interactiveShell(t)
	term.typeEtcdlock(`run job --ttl 5s -- sh -c 'echo rea""dy; read x; echo "got:$x"; exit 3'`)
	term.expect("ready", 20*time.Second)
	term.send("\x1a")
	term.expect("Stopped", 10*time.Second)
	term.send("fg\n")
	term.send("again\n")
	term.expect("got:again", 10*time.Second)
	term.send("echo code=$?\n")
	term.expect("code=3", 10*time.Second)
	term.send("exit\n")
	if code := term.exitCode(); code != 0 {
		t.Errorf("bash exited %d; output:\n%s", code, term.out)
	}
}

// A job stopped with Ctrl-Z for longer than the lease: etcdlock renews
// nothing while stopped, so its guardian stops the command at the
// deadline, before the next holder can have the lock; fg then reports the
// loss (79).
func TestCLITerminalStoppedPastTheLease(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	term := interactiveShell(t)
	term.typeEtcdlock(`run job --ttl 3s -- sh -c 'echo $$ > ` + dir + `/pid; echo rea""dy; read x'`)
	term.expect("ready", 20*time.Second)
	g := &guarded{dir: dir}
	b, err := os.ReadFile(dir + "/pid")
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	g.pids = []int{hostPID(t, term.cmd.Process.Pid, pid)}
	term.send("\x1a")
	term.expect("Stopped", 10*time.Second)
	h := <-nextHolder(t, g)
	h.check(t)
	// The shell has the terminal since the job stopped; the guardian
	// must not take it back for the stopped job when it kills the command.
	time.Sleep(100 * time.Millisecond)
	if fg, err := unix.IoctlGetInt(int(term.tty.Fd()), unix.TIOCGPGRP); err != nil || fg != term.cmd.Process.Pid {
		t.Errorf("terminal's foreground group %d (%v), want the shell's %d", fg, err, term.cmd.Process.Pid)
	}
	term.send("fg\n")
	term.send("echo code=$?\n")
	term.expect("code=79", 10*time.Second)
	if !strings.Contains(term.out.String(), "no lease renewal") {
		t.Errorf("the guardian did not explain:\n%s", term.out)
	}
	term.send("exit\n")
	_ = term.exitCode()
}

// With `stty tostop`, the guardian — in a background group of the
// terminal — still stops the command of a frozen etcdlock, and its note
// reaches the terminal.
func TestCLITerminalTostopFrozen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	term := onTerminal(t, cliCommand(t, shared.Endpoints()[0], nil, "run", "job", "--ttl", "3s", "--",
		"sh", "-c", `stty tostop; echo $$ > `+dir+`/pid; echo rea""dy; exec sleep 100`))
	term.expect("ready", 20*time.Second)
	b, err := os.ReadFile(dir + "/pid")
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	g := &guarded{dir: dir, pids: []int{hostPID(t, term.cmd.Process.Pid, pid)}}
	next := nextHolder(t, g)
	if err := term.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	h := <-next
	h.check(t)
	term.expect("no lease renewal", 5*time.Second)
}

// With `stty tostop`, etcdlock — in a background group of the terminal
// while its command has it — writes its own notes without being stopped
// by SIGTTOU: stopped, it would renew nothing, and the guardian would stop
// the command at the deadline.
func TestCLITerminalTostopNotesOfEtcdlock(t *testing.T) {
	t.Parallel()
	p, proxyURL := etcdtest.Proxy(t, shared.Endpoints()[0])
	term := onTerminal(t, cliCommand(t, proxyURL, nil, "run", "job", "--ttl", "10s", "--",
		"sh", "-c", `stty tostop; echo rea""dy; exec sleep 100`))
	term.expect("ready", 20*time.Second)
	p.PauseTx()
	term.expect("renewals of the lease are failing", 15*time.Second)
	p.UnpauseTx()
	term.expect("the lease was renewed again", 15*time.Second)
	if strings.Contains(term.out.String(), "SIGKILL") {
		t.Errorf("the command was stopped:\n%s", term.out)
	}
}

// A command killed by a signal leaves the terminal as it was before the
// command, as a shell restores it for a job killed by a signal: etcdlock
// exits 128+N, which a shell takes for a normal exit.
func TestCLITerminalRestoredAfterSignal(t *testing.T) {
	t.Parallel()
	term := onTerminal(t, cliCommand(t, shared.Endpoints()[0], nil, "run", "job", "--",
		"sh", "-c", `stty -icanon -echo; echo rea""dy; kill -9 $$`))
	term.expect("ready", 20*time.Second)
	if code := term.exitCode(); code != 128+int(syscall.SIGKILL) {
		t.Errorf("exit %d, want %d; output:\n%s", code, 128+int(syscall.SIGKILL), term.out)
	}
	tio, err := unix.IoctlGetTermios(int(term.tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if want := uint32(unix.ICANON | unix.ECHO); tio.Lflag&want != want {
		t.Errorf("terminal left with lflag %#x: ICANON or ECHO off", tio.Lflag)
	}
}

// Ctrl-C stops a list typed at an interactive shell, as it would without
// etcdlock (and with flock): the shell runs nothing after a job that died
// of SIGINT, but would after one that exited 130.
func TestCLITerminalInterruptStopsTheList(t *testing.T) {
	t.Parallel()
	term := interactiveShell(t)
	term.typeEtcdlock(`run job -- sh -c 'echo rea""dy; exec sleep 30'; echo de""ployed`)
	term.expect("ready", 20*time.Second)
	term.send("\x03")
	term.send(`echo af""ter` + "\n")
	term.expect("after", 10*time.Second)
	if strings.Contains(term.out.String(), "deployed") {
		t.Errorf("the shell ran the rest of the list after Ctrl-C:\n%s", term.out)
	}
	term.send("exit\n")
	_ = term.exitCode()
}

// Ctrl-C stops a script that runs etcdlock, as it stops one that runs the
// command directly (or under flock): the terminal's SIGINT reaches only
// the command, which etcdlock put in the foreground, so etcdlock gives it
// to its own process group, the script's, when the command dies of it.
func TestCLITerminalInterruptStopsTheScript(t *testing.T) {
	t.Parallel()
	term := interactiveShell(t)
	loop := `for i in 1 2 3; do echo it""eration $i; ` + cliPath + " --endpoints " + shared.Endpoints()[0] + " --prefix " + prefixOf(t) +
		` run job -- sh -c "echo rea""dy; exec sleep 30"; done; echo loop-e""nd`
	term.send(`bash -c '` + loop + `'` + "\n")
	term.expect("ready", 20*time.Second)
	term.send("\x03")
	// Without the script's stop, the next iteration would be waiting for
	// the lock's next command, and this line would wait behind it.
	term.send(`echo af""ter` + "\n")
	term.expect("after", 10*time.Second)
	if out := term.out.String(); strings.Contains(out, "iteration 2") || strings.Contains(out, "loop-end") {
		t.Errorf("the script went on after Ctrl-C:\n%s", out)
	}
	term.send("exit\n")
	_ = term.exitCode()
}

// A job started in the background whose command reads the terminal is
// stopped by SIGTTIN; a plain kill of etcdlock (the shell's kill %1, which
// does not continue a job the shell sees running) must still end it: the
// guardian continues the stopped command after forwarding the signal.
func TestCLITerminalBackgroundJobStoppedByReadEndsOnKill(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	term := interactiveShell(t)
	term.typeEtcdlock(`run job -- sh -c 'echo $$ > ` + dir + `/pid; read x; echo "g""ot:$x"' &`)
	term.send("echo \"b\"\"g=$!.\"\n") // the echoed input does not match bg=N.
	bgPid := regexp.MustCompile(`bg=([0-9]+)\.`)
	var bg int
	etcdtest.Eventually(t, 10*time.Second, func() bool {
		if m := bgPid.FindStringSubmatch(term.out.String()); m != nil {
			bg, _ = strconv.Atoi(m[1])
		}
		return bg > 0
	}, "the shell did not echo the pid of the job's etcdlock")
	// A job still stuck when the test ends keeps the terminal open: kill
	// -9 of etcdlock ends it (its guardian then kills the command).
	t.Cleanup(func() { _ = syscall.Kill(bg, syscall.SIGKILL) })
	pid := pidIn(t, bg, dir+"/pid")
	etcdtest.Eventually(t, 20*time.Second, func() bool { state, _ := procState(pid); return state == "T" }, "the command was not stopped by its read")
	term.send("kill %1; wait %1; echo code=$?\n")
	term.expect("code=143", 15*time.Second)
	if r := cli(t, shared.Endpoints()[0], nil, "status", "job"); !strings.Contains(r.stdout, "free") {
		t.Errorf("lock not released: %q", r.stdout)
	}
	if strings.Contains(term.out.String(), "got:") {
		t.Errorf("the command went on reading:\n%s", term.out)
	}
	term.send("exit\n")
	_ = term.exitCode()
}

// acquire's assignments, for eval from a pipe, quote a value exactly; on a
// terminal, read by a person, a control character is shown escaped, as
// status shows it, never sent to the terminal.
func TestCLIAcquireEscapesOnATerminal(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	owner := "o\x1b[2J"
	piped := cli(t, ep, nil, "acquire", "piped", "--owner", owner)
	if piped.code != 0 || !strings.Contains(piped.stdout, "ETCDLOCK_OWNER='"+owner+"'\n") {
		t.Errorf("acquire into a pipe: %d %q; want the owner quoted exactly, for eval", piped.code, piped.stdout)
	}
	term := onTerminal(t, cliCommand(t, ep, nil, "acquire", "shown", "--owner", owner))
	if code := term.exitCode(); code != 0 {
		t.Fatalf("acquire on a terminal: exit %d\n%q", code, term.out)
	}
	<-term.done
	if out := term.out.String(); strings.Contains(out, "\x1b") || !strings.Contains(out, `ETCDLOCK_OWNER="o\x1b[2J"`) {
		t.Errorf("acquire on a terminal printed %q; want the owner escaped", out)
	}
}
