//go:build linux

package guardian

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/cmd/internal/exitcode"
)

// sibling puts an executable named Binary beside the test binary (where
// guardianExe looks) for the test's duration: a copy of the test binary,
// which is a guardian too (TestMain), or a script.
func sibling(t *testing.T, script string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(filepath.Dir(exe), Binary)
	if script == "" {
		b, err := os.ReadFile(exe)
		if err != nil {
			t.Fatal(err)
		}
		err = os.WriteFile(path, b, 0o755)
	} else {
		err = os.WriteFile(path, []byte(script), 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(path) })
	return path
}

// runEcho runs `echo ok` under g and returns its exit code.
func runEcho(t *testing.T, g *Guardian) int {
	t.Helper()
	now := time.Now()
	if err := g.Run(Config{Argv: []string{"/bin/sh", "-c", "echo ok"}, Env: os.Environ(), KillSignal: syscall.SIGTERM,
		Soft: now.Add(time.Hour), Hard: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for ev := range g.Events() {
		if ev.Exited {
			for range g.Events() {
			}
			return ev.Code
		}
	}
	t.Fatalf("the guardian exited without reporting: %v", g.Err())
	return -1
}

func TestSpawnedGuardianRunsTheCommandWhenGivenIt(t *testing.T) {
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	g, err := Spawn(Stdio{Stdout: stdout, Stderr: stderr}, ContainAuto)
	if err != nil {
		t.Fatal(err)
	}
	if code := runEcho(t, g); code != 0 || stdout.String() != "ok\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if g.p.exe != selfExe() {
		t.Errorf("started %s, want the running binary (no %s beside it)", g.p.exe, Binary)
	}
}

func TestSpawnedGuardianClosedWithoutACommandExitsQuietly(t *testing.T) {
	stderr := &syncBuffer{}
	g, err := Spawn(Stdio{Stderr: stderr}, ContainAuto)
	if err != nil {
		t.Fatal(err)
	}
	pid := g.p.cmd.Process.Pid
	g.Close()
	if err := g.Err(); err != nil {
		t.Errorf("guardian closed before a command: %v, want exit 0", err)
	}
	if stderr.String() != "" {
		t.Errorf("guardian closed before a command wrote %q", stderr)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("guardian %d still exists after Close", pid)
	}
	if err := g.Run(Config{Argv: []string{"true"}}); err == nil {
		t.Error("Run after Close succeeded")
	}
}

func TestGuardianBinaryBesideTheExecutableIsUsed(t *testing.T) {
	path := sibling(t, "")
	stdout := &syncBuffer{}
	g, err := Spawn(Stdio{Stdout: stdout, Stderr: os.Stderr}, ContainAuto)
	if err != nil {
		t.Fatal(err)
	}
	if g.p.exe != path {
		t.Fatalf("started %s, want %s", g.p.exe, path)
	}
	if code := runEcho(t, g); code != 0 || stdout.String() != "ok\n" {
		t.Fatalf("exit %d, stdout %q", code, stdout)
	}
}

func TestGuardianBinaryOfAnotherReleaseIsReplaced(t *testing.T) {
	// Exits at once, as a guardian of another protocol does.
	sibling(t, "#!/bin/sh\nexit 64\n")
	stdout := &syncBuffer{}
	g, err := Spawn(Stdio{Stdout: stdout, Stderr: os.Stderr}, ContainAuto)
	if err != nil {
		t.Fatal(err)
	}
	if code := runEcho(t, g); code != 0 || stdout.String() != "ok\n" {
		t.Fatalf("exit %d, stdout %q", code, stdout)
	}
	if g.p.exe != selfExe() {
		t.Errorf("ran under %s, want the running binary", g.p.exe)
	}
}

func TestGuardianRefusesAnotherProtocolSilently(t *testing.T) {
	var stderr bytes.Buffer
	t.Setenv(EnvMarker, "1")
	if code := Main(&stderr); code != exitcode.Usage || stderr.Len() != 0 {
		t.Errorf("Main with protocol 1: %d %q, want %d and nothing written", code, stderr.String(), exitcode.Usage)
	}
}

// A guardian binary that hangs (its child holds the pipes too) is killed
// with its group once readyWithin passes, and replaced.
func TestHangingGuardianBinaryIsReplaced(t *testing.T) {
	sibling(t, "#!/bin/sh\nsleep 60\n")
	stdout := &syncBuffer{}
	g, err := Spawn(Stdio{Stdout: stdout, Stderr: os.Stderr}, ContainAuto)
	if err != nil {
		t.Fatal(err)
	}
	hung := g.p.cmd.Process.Pid
	begin := time.Now()
	if err := g.Ready(); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(begin); waited > 30*time.Second {
		t.Errorf("Ready waited %v for a hanging guardian", waited)
	}
	if live := liveInGroup(t, hung); len(live) > 0 {
		t.Errorf("processes %v of the hanging guardian's group %d still run", live, hung)
	}
	if code := runEcho(t, g); code != 0 || stdout.String() != "ok\n" {
		t.Fatalf("exit %d, stdout %q", code, stdout)
	}
}

// liveInGroup lists the processes of process group pgid that run (not
// zombies, which this subreaper test process may not have reaped).
func liveInGroup(t *testing.T, pgid int) []int {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var live []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces, so split after ')'.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 2 && f[0] != "Z" && f[2] == strconv.Itoa(pgid) {
			live = append(live, pid)
		}
	}
	return live
}

// A guardian killed while it waited for its command (while etcdlock waited
// for the lock) is replaced when the command is due.
func TestGuardianKilledBeforeItsCommandIsReplaced(t *testing.T) {
	stdout := &syncBuffer{}
	g, err := Spawn(Stdio{Stdout: stdout, Stderr: os.Stderr}, ContainAuto)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.p.awaitReady(time.Minute); err != nil { // start-up is not what is tested
		t.Fatal(err)
	}
	first := g.p
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-first.done
	if code := runEcho(t, g); code != 0 || stdout.String() != "ok\n" {
		t.Fatalf("exit %d, stdout %q", code, stdout)
	}
	if g.p == first {
		t.Error("the killed guardian was not replaced")
	}
}
