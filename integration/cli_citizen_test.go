package integration

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
)

// What scripts and cron jobs need of a lock tool, as flock(1) offers it:
// a refused --try that stays silent, a conflict exit code of the caller's
// choosing, --timeout in plain seconds, and a note when a wait ends.
func TestCLIShellCitizen(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	dir := t.TempDir()
	holdingRun(t, ep, dir, "a", "job")
	etcdtest.Eventually(t, 20*time.Second, func() bool { return running(dir, "a") != "" }, "holder never ran")

	// quiet try
	{
		if r := cli(t, ep, nil, "run", "-q", "--try", "job", "--", "true"); r.code != 75 || r.stderr != "" {
			t.Errorf("-q --try on a held lock: exit %d stderr %q, want 75 and nothing", r.code, r.stderr)
		}
		if r := cli(t, ep, nil, "run", "--try", "job", "--", "true"); r.code != 75 || r.stderr == "" {
			t.Errorf("--try on a held lock: exit %d stderr %q, want 75 and the holder", r.code, r.stderr)
		}
		if r := cli(t, ep, nil, "-q", "status", "job", "--bogus"); r.code != 64 || r.stderr == "" {
			t.Errorf("-q with a usage error: exit %d stderr %q, want 64 and the error", r.code, r.stderr)
		}
	}
	// conflict exit code
	{
		if r := cli(t, ep, nil, "run", "-E", "3", "--try", "job", "--", "true"); r.code != 3 {
			t.Errorf("-E 3 --try: exit %d, want 3; stderr %q", r.code, r.stderr)
		}
		if r := cli(t, ep, nil, "run", "--conflict-exit-code", "3", "--timeout", "200ms", "job", "--", "true"); r.code != 3 {
			t.Errorf("-E 3 --timeout: exit %d, want 3; stderr %q", r.code, r.stderr)
		}
		if r := cli(t, ep, nil, "acquire", "-E", "3", "job"); r.code != 3 {
			t.Errorf("acquire -E 3: exit %d, want 3; stderr %q", r.code, r.stderr)
		}
		if r := cli(t, ep, nil, "run", "-E", "300", "--try", "job", "--", "true"); r.code != 64 {
			t.Errorf("-E 300: exit %d, want 64", r.code)
		}
		if r := cli(t, ep, nil, "run", "-E", "3", "other", "--", "sh", "-c", "exit 5"); r.code != 5 {
			t.Errorf("-E 3 does not change the command's code: exit %d, want 5", r.code)
		}
	}
	// timeout in seconds
	{
		if r := cli(t, ep, nil, "run", "--timeout", "0.5", "job", "--", "true"); r.code != 124 {
			t.Errorf("--timeout 0.5: exit %d, want 124; stderr %q", r.code, r.stderr)
		}
		if r := cli(t, ep, nil, "run", "--timeout", "soon", "job", "--", "true"); r.code != 64 || !strings.Contains(r.stderr, "seconds") {
			t.Errorf("--timeout soon: exit %d stderr %q, want 64 naming the forms", r.code, r.stderr)
		}
	}
	// acquired after waiting
	{
		waiter := cliCommand(t, ep, nil, "run", "job", "--", "true")
		stderr := &lockedBuffer{}
		waiter.Stderr = stderr
		if err := waiter.Start(); err != nil {
			t.Fatal(err)
		}
		waitQueued(t, context.Background(), etcdtest.Client(t, ep), "job", 2)
		// A run says whom it waits for once it has waited a while: the
		// holder ends after that.
		etcdtest.Eventually(t, 20*time.Second, func() bool { return strings.Contains(stderr.String(), "held by") }, "no holder note")
		if err := os.WriteFile(filepath.Join(dir, "a.stop"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := waiter.Wait(); err != nil {
			t.Fatalf("waiter: %v; stderr %s", err, stderr.String())
		}
		if !strings.Contains(stderr.String(), "held by") || !strings.Contains(stderr.String(), `acquired lock "job"`) {
			t.Errorf("stderr %q: want the holder, then the acquisition", stderr.String())
		}
	}
}

// etcdlock runs on one P unless GOMAXPROCS is set (package oneproc), and
// sets it before the etcd client, gRPC and protobuf initialise, which is
// where half of the saving is. The commands it runs get the environment
// it was given, with or without GOMAXPROCS.
func TestCLIOneProcIsSetFirstAndNotPassedOn(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(cliPath, "version")
	cmd.Env = append(cleanEnv(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("version: %v: %s", err, stderr.String())
	}
	oneproc, first := -1, -1
	for i, line := range strings.Split(stderr.String(), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "init" {
			continue
		}
		switch pkg := f[1]; {
		case strings.HasSuffix(pkg, "/internal/oneproc"):
			oneproc = i
		case first < 0 && (strings.HasPrefix(pkg, "go.etcd.io/") || strings.HasPrefix(pkg, "google.golang.org/")):
			first = i
		}
	}
	if oneproc < 0 || first < 0 || oneproc > first {
		t.Errorf("oneproc initialised at line %d, the first of etcd's, gRPC's and protobuf's at line %d; want oneproc first:\n%s", oneproc, first, stderr.String())
	}

	ep := shared.Endpoints()[0]
	for _, env := range [][]string{nil, {"GOMAXPROCS=3"}} {
		r := cli(t, ep, env, "run", "job", "--", "sh", "-c", `echo "[$GOMAXPROCS]"`)
		want := "[]\n"
		if env != nil {
			want = "[3]\n"
		}
		if r.code != 0 || r.stdout != want {
			t.Errorf("run with env %q: exit %d stdout %q, want %q; stderr %q", env, r.code, r.stdout, want, r.stderr)
		}
	}
}

// The command gets its arguments and environment byte for byte, also
// bytes that are not UTF-8 (a Latin-1 file name, a binary token), under
// run and elect alike.
func TestCLICommandGetsArgumentsAndEnvironmentByteForByte(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	const arg, val = "caf\xe9 \xff\xfe", "v\x80al\xc3("
	want := arg + "|" + val
	for _, args := range [][]string{
		{"run", "job", "--", "sh", "-c", `printf '%s|%s' "$1" "$V"`, "sh", arg},
		{"elect", "ctl", "--", "sh", "-c", `printf '%s|%s' "$1" "$V"`, "sh", arg},
	} {
		r := cli(t, ep, []string{"V=" + val}, args...)
		if r.code != 0 || r.stdout != want {
			t.Errorf("%s: exit %d stdout %q, want %q; stderr %q", args[0], r.code, r.stdout, want, r.stderr)
		}
	}
}
