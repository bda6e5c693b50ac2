package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// `nohup etcdlock run …` protects the command from a hangup as `nohup
// flock …` does: a SIGHUP ignored by etcdlock's parent stays ignored by
// etcdlock, its guardian and the command.
func TestCLINohupIgnoresHangup(t *testing.T) {
	t.Parallel()
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
	pid := pidIn(t, cmd.Process.Pid, filepath.Join(dir, "pid"))
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
	t.Parallel()
	ep := shared.Endpoints()[0]
	dir := t.TempDir()
	cmd := cliCommand(t, ep, []string{"D=" + dir}, "run", "job", "--shell", "--", `echo $$ > "$D/pid"; exec sleep 100`)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pidIn(t, cmd.Process.Pid, filepath.Join(dir, "pid"))
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

// The variables run exports to its command say which lock the command
// runs under; they are no input to an etcdlock the command runs on
// another lock: a nested release or break of another name does not use
// the outer owner or token, a nested run does not record the outer owner.
func TestCLINestedCallsDoNotInheritTheOuterLock(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	dir := t.TempDir()
	// Another holder of "other", under a token the nested calls could
	// misuse if they took the outer one.
	r := cli(t, ep, nil, "acquire", "other", "--owner", "them", "--ttl", "60s")
	if r.code != 0 {
		t.Fatalf("acquire: %d %s", r.code, r.stderr)
	}
	el := `"$E" --endpoints "$EP" --prefix "$P"`
	script := `echo "$ETCDLOCK_OWNER" > "$D/outer"
` + el + ` release other; echo $? > "$D/release"
` + el + ` break other; echo $? > "$D/break"
` + el + ` run inner -- sh -c 'echo "$ETCDLOCK_OWNER"' > "$D/inner"
` + el + ` renew outer; echo $? > "$D/renew-own"`
	r = cli(t, ep, []string{"D=" + dir, "E=" + cliPath, "EP=" + ep, "P=" + prefixOf(t)}, "run", "outer", "--shell", "--", script)
	if r.code != 0 {
		t.Fatalf("outer run: %d %s", r.code, r.stderr)
	}
	read := func(f string) string {
		b, _ := os.ReadFile(filepath.Join(dir, f))
		return strings.TrimSpace(string(b))
	}
	if got := read("release"); got != "64" {
		t.Errorf("nested release of another lock: exit %s, want 64 (no --owner/--token of its own)", got)
	}
	if got := read("break"); got != "64" {
		t.Errorf("nested break of another lock: exit %s, want 64 (no --token of its own)", got)
	}
	if outer, inner := read("outer"), read("inner"); inner == "" || inner == outer {
		t.Errorf("nested run recorded owner %q, the outer run's is %q", inner, outer)
	}
	if got := read("renew-own"); got != "0" {
		t.Errorf("renew of the run's own lock from its variables: exit %s, want 0", got)
	}
	if r := cli(t, ep, nil, "status", "other"); !strings.Contains(r.stdout, "held by them") {
		t.Errorf("other's holder disturbed: %q", r.stdout)
	}
}
