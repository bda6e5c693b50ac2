package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
)

// pidIn reads the pid a command wrote to path once it appears.
func pidIn(t *testing.T, path string) int {
	t.Helper()
	var pid int
	etcdtest.Eventually(t, 20*time.Second, func() bool {
		b, err := os.ReadFile(path)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}, "the command never wrote its pid")
	return pid
}

// `nohup etcdlock run …` protects the command from a hangup as `nohup
// flock …` does: a SIGHUP ignored by etcdlock's parent stays ignored by
// etcdlock, its guardian and the command.
func TestCLINohupIgnoresHangup(t *testing.T) {
	dir := t.TempDir()
	cmd := cliCommand(t, shared.Endpoints()[0], []string{"D=" + dir}, "run", "job", "--shell", "--",
		`echo $$ > "$D/pid"; while [ ! -e "$D/stop" ]; do sleep 0.05; done; echo done > "$D/done"`)
	// As nohup does: SIGHUP ignored, then exec.
	cmd.Args = append([]string{"sh", "-c", `trap '' HUP; exec "$0" "$@"`}, cmd.Args...)
	cmd.Path = "/bin/sh"
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := pidIn(t, filepath.Join(dir, "pid"))
	// A hangup as the terminal and the shell send it: to etcdlock and to
	// the command's process group.
	for _, p := range []int{cmd.Process.Pid, -pid} {
		if err := syscall.Kill(p, syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("etcdlock under nohup after SIGHUP: %v, want exit 0", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "done")); err != nil {
		t.Errorf("the command did not finish: %v", err)
	}
}

// SIGTERM sent to etcdlock reaches the command; the command dies of it,
// and so does etcdlock once the lock is released, as a wrapper that execs
// (or flock) would: its parent sees a death by SIGTERM, not an exit 143.
func TestCLIDiesOfTheCommandsSignal(t *testing.T) {
	ep := shared.Endpoints()[0]
	dir := t.TempDir()
	cmd := cliCommand(t, ep, []string{"D=" + dir}, "run", "job", "--shell", "--", `echo $$ > "$D/pid"; exec sleep 100`)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pidIn(t, filepath.Join(dir, "pid"))
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || !ee.Sys().(syscall.WaitStatus).Signaled() || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Errorf("etcdlock ended with %v, want death by SIGTERM", err)
	}
	if r := cli(t, ep, nil, "status", "job"); !strings.Contains(r.stdout, "free") {
		t.Errorf("lock not released: %q", r.stdout)
	}
	// A command that exits 143 by itself is an exit, not a death.
	if r := cli(t, ep, nil, "run", "job", "--", "sh", "-c", "exit 143"); r.code != 143 {
		t.Errorf("exit 143 of the command: etcdlock exit %d", r.code)
	}
}
