//go:build linux

package guardian

import (
	"bytes"
	"os"
	"path/filepath"
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
	g, err := Spawn(Stdio{Stdout: stdout, Stderr: stderr})
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
	g, err := Spawn(Stdio{Stderr: stderr})
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
	g, err := Spawn(Stdio{Stdout: stdout, Stderr: os.Stderr})
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
	g, err := Spawn(Stdio{Stdout: stdout, Stderr: os.Stderr})
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
