package guardian

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The command gets the environment that os/exec would have given it:
// the last entry of each name, in order, entries that are not
// name=value, names that start with "=", bytes that are not UTF-8.
func TestForkExecPassesTheEnvironmentAsOSExecDoes(t *testing.T) {
	env := []string{"A=1", "B=2", "A=3", "NOEQUALS", "", "=x", "=a=b", "=a=c", "C=\xff\xfe", "B=", "NOEQUALS"}
	dir := t.TempDir()
	viaExec, viaGuardian := filepath.Join(dir, "exec"), filepath.Join(dir, "guardian")

	c := exec.Command("cp", "/proc/self/environ", viaExec)
	c.Env = env
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	pid, err := forkExec([]string{"cp", "/proc/self/environ", viaGuardian}, env, &syscall.SysProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	var ws unix.WaitStatus
	if _, err := unix.Wait4(pid, &ws, 0, nil); err != nil || ws.ExitStatus() != 0 {
		t.Fatalf("cp: %v, status %v", err, ws)
	}
	want, _ := os.ReadFile(viaExec)
	got, _ := os.ReadFile(viaGuardian)
	if !bytes.Equal(got, want) {
		t.Errorf("environment %q, want %q (os/exec's)", bytes.Split(got, []byte{0}), bytes.Split(want, []byte{0}))
	}
	if bytes.Count(want, []byte("A=")) != 1 {
		t.Fatalf("os/exec kept %q: the test's premise (it keeps one A) is wrong", want)
	}

	if _, err := forkExec([]string{"true"}, []string{"A=1\x00"}, &syscall.SysProcAttr{}); err == nil {
		t.Error("an environment entry with a NUL byte was accepted")
	}
}
