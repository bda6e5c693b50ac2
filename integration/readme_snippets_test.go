package integration

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
)

// The shell snippets of the README's quick starts and of the CLI's manual,
// read from the files and run as written through the built binaries: a
// snippet that changes is run as changed.

// shellBlock returns the n-th (from 0) ```sh block after the line heading
// in the Markdown file path, failing t if there is none.
func shellBlock(t *testing.T, path, heading string, n int) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no heading %q", path, heading)
	}
	for i := 0; ; i++ {
		var block string
		if _, rest, ok = strings.Cut(rest, "\n```sh\n"); ok {
			block, rest, ok = strings.Cut(rest, "\n```\n")
		}
		if !ok {
			t.Fatalf("%s: no shell block %d after %q", path, n, heading)
		}
		if i == n {
			return block + "\n"
		}
	}
}

// runSnippet runs script with bash in dir, with env, in a process group of
// its own, writing its output to a file, and returns the exit code and the
// output file. Whatever the script left running in the background is
// stopped (SIGTERM, then SIGKILL) when t ends, and waited for.
func runSnippet(t *testing.T, dir, script string, env []string) (int, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx := testCtx(t, 2*time.Minute)
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		gone := func() bool { return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH) }
		deadline := time.Now().Add(20 * time.Second)
		for !gone() && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if !gone() {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			t.Errorf("the snippet's background processes outlived SIGTERM by 20 s")
		}
	})
	return exitCodeOf(cmd.Wait()), out
}

// readOutput is the snippet's output so far.
func readOutput(t *testing.T, out string) string {
	t.Helper()
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The README's CLI quick start, pasted into a shell: a dev server, a
// holder in the background, a --try that finds it held and exits as the
// comment says, and a status naming the holder. The test has built the
// binaries (the snippet's make build) and serves on a free port instead
// of 2379.
func TestREADMEQuickStartCLI(t *testing.T) {
	t.Parallel()
	script := shellBlock(t, "../README.md", "## Quick start: the CLI wrapping a command", 0)
	build, script, ok := strings.Cut(script, "\n")
	if !strings.HasPrefix(build, "make build ") {
		t.Fatalf("the quick start's first line is %q, want make build (which the test has done)", build)
	}
	want := regexp.MustCompile(`echo "exit \$\?"\s+# (exit \d+)`).FindStringSubmatch(script)
	if !ok || want == nil || !strings.Contains(script, "127.0.0.1:2379") {
		t.Fatalf("the quick start no longer starts a dev server on 127.0.0.1:2379 or says which exit the --try gets:\n%s", script)
	}
	addr := etcdtest.FreeAddr(t)
	script = strings.ReplaceAll(script, "127.0.0.1:2379", addr)

	dir := t.TempDir()
	if err := os.Symlink(filepath.Dir(cliPath), filepath.Join(dir, "bin")); err != nil {
		t.Fatal(err)
	}
	code, out := runSnippet(t, dir, script, append(cleanEnv(), "ETCDLOCK_ENDPOINTS="+addr))
	if code != 0 {
		t.Errorf("the quick start exited %d", code)
	}
	got := readOutput(t, out)
	if !strings.Contains(got, want[1]+"\n") {
		t.Errorf("the quick start printed no %q:\n%s", want[1], got)
	}
	if !strings.Contains(got, "held by") {
		t.Errorf("status named no holder:\n%s", got)
	}
	// The background run's command prints its token once it holds.
	token := regexp.MustCompile(`(?m)^token [1-9][0-9]*$`)
	etcdtest.Eventually(t, 30*time.Second, func() bool { return token.MatchString(readOutput(t, out)) },
		"the wrapped command never printed its token")
}

// The manual's script that manages the lock itself: acquire, a fenced
// write with the token, renew, release, against the shared cluster. psql
// stands for any fenced write; a shell function prints what it was given.
func TestManualScriptSnippet(t *testing.T) {
	t.Parallel()
	script := shellBlock(t, "../cmd/etcdlock/README.md", "A script that manages the lock itself:", 0)
	if !strings.Contains(script, "psql ") {
		t.Fatalf("the manual's script no longer writes with psql:\n%s", script)
	}
	ep := shared.Endpoints()[0]
	env := append(cleanEnv(), "ETCDLOCK_ENDPOINTS="+ep, "ETCDLOCK_PREFIX="+prefixOf(t))
	code, out := runSnippet(t, t.TempDir(), `psql() { echo "psql $*"; }
PATH=`+filepath.Dir(cliPath)+`:$PATH
`+script, env)
	got := readOutput(t, out)
	if code != 0 {
		t.Errorf("the script exited %d:\n%s", code, got)
	}
	if !regexp.MustCompile(`(?m)^psql -v token=[1-9][0-9]* -f migrate.sql$`).MatchString(got) {
		t.Errorf("the write was not given the token:\n%s", got)
	}
	if r := cli(t, ep, nil, "status", "migrate"); r.code != 0 || strings.Contains(r.stdout, "held by") {
		t.Errorf("after the script, status = %d %q; want the lock free", r.code, r.stdout)
	}
}
