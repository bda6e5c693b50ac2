package integration

import (
	"os"
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
