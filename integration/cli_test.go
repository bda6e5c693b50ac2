package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
)

// Two --try runs at once: one runs its command, the other exits 75. The
// command holds the lock until the other run has ended, so that on a
// loaded machine the second does not start after the first is done; if
// both held it (the bug this catches), neither ends, and the test lets
// them go after a minute.
func TestCLITwoTryRunsAtOnce(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	for round := range 5 {
		done := filepath.Join(t.TempDir(), "done")
		var wg sync.WaitGroup
		codes := make([]int, 2)
		ended := make(chan struct{}, 2)
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				codes[i] = cli(t, ep, nil, "run", "--try", "job", "--", "sh", "-c", `while [ ! -e "$0" ]; do sleep 0.01; done`, done).code
				ended <- struct{}{}
			}()
		}
		select {
		case <-ended:
		case <-time.After(time.Minute):
		}
		if err := os.WriteFile(done, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if !(codes[0] == 0 && codes[1] == 75 || codes[0] == 75 && codes[1] == 0) {
			t.Fatalf("round %d: exit codes %v, want one 0 and one 75", round, codes)
		}
	}
}

func TestCLITokenInChildOverridesInheritedAndIncreases(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	cl := etcdtest.Client(t, ep)
	var last int64
	for range 3 {
		dir := t.TempDir()
		out := filepath.Join(dir, "env")
		script := fmt.Sprintf(`echo "$ETCDLOCK_TOKEN $ETCDLOCK_KEY $ETCDLOCK_NAME $ETCDLOCK_OWNER $ETCDLOCK_DEADLINE" > %s.tmp && mv %[1]s.tmp %[1]s && sleep 1`, out)
		cmd := cliCommand(t, ep, []string{"ETCDLOCK_TOKEN=999999999", "ETCDLOCK_KEY_FILE=", "ETCDLOCK_NAME=wrong"}, "run", "job", "--owner", "tester", "--shell", "--", script)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var fields []string
		etcdtest.Eventually(t, 10*time.Second, func() bool {
			b, err := os.ReadFile(out)
			fields = strings.Fields(string(b))
			return err == nil
		}, "child did not write its environment")
		if len(fields) != 5 {
			t.Fatalf("child env = %q", fields)
		}
		tok, _ := strconv.ParseInt(fields[0], 10, 64)
		resp, err := cl.Get(context.Background(), fields[1])
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("ETCDLOCK_KEY %s not in etcd: %v", fields[1], err)
		}
		if tok != resp.Kvs[0].CreateRevision {
			t.Errorf("ETCDLOCK_TOKEN %d, key's create revision %d", tok, resp.Kvs[0].CreateRevision)
		}
		if fields[2] != "job" || fields[3] != "tester" {
			t.Errorf("ETCDLOCK_NAME/OWNER = %q %q", fields[2], fields[3])
		}
		if _, err := time.Parse(time.RFC3339Nano, fields[4]); err != nil {
			t.Errorf("ETCDLOCK_DEADLINE %q: %v", fields[4], err)
		}
		if tok <= last {
			t.Errorf("token %d not above previous run's %d", tok, last)
		}
		last = tok
		if err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCLIExitCodes(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	dir := t.TempDir()
	tests := []struct {
		name string
		env  []string
		args []string
		want int
		msg  string // substring of stderr
	}{
		{"child code", nil, []string{"run", "a", "--", "sh", "-c", "exit 3"}, 3, ""},
		{"killed by signal", nil, []string{"run", "a", "--", "sh", "-c", "kill -9 $$"}, 128 + 9, ""},
		{"command not found", nil, []string{"run", "a", "--", filepath.Join(dir, "nope")}, 127, "cannot start"},
		{"unknown flag", nil, []string{"run", "--bogus", "a", "--", "true"}, 64, "unknown flag"},
		{"no command", nil, []string{"run", "a"}, 64, "missing COMMAND"},
		{"bad ttl", nil, []string{"run", "--ttl", "0s", "a", "--", "true"}, 64, "--ttl"},
		{"bad ttl env", []string{"ETCDLOCK_TTL=soon"}, []string{"run", "a", "--", "true"}, 64, "ETCDLOCK_TTL"},
		{"huge ttl", nil, []string{"run", "--ttl", "2562047h", "a", "--", "true"}, 64, "maximum"},
		{"huge acquire ttl", nil, []string{"acquire", "a", "--owner", "o", "--ttl", "2562047h"}, 64, "maximum"},
		{"bad name", nil, []string{"status", ""}, 64, "invalid name"},
		{"bad token", nil, []string{"renew", "a", "--owner", "o", "--token", "-1"}, 64, "invalid token"},
		{"missing owner", nil, []string{"release", "a", "--token", "5"}, 64, "--owner"},
		{"empty owner", nil, []string{"acquire", "a", "--owner", ""}, 64, "--owner"},
		{"bad signal", nil, []string{"run", "--kill-signal", "NOPE", "a", "--", "true"}, 64, "unknown signal"},
		{"bad output", nil, []string{"-w", "yaml", "status", "a"}, 64, "simple or json"},
		{"skip-verify without TLS", nil, []string{"--insecure-skip-tls-verify", "status", "a"}, 64, "--insecure-skip-tls-verify"},
		{"missing TLS file", nil, []string{"--cacert", filepath.Join(dir, "ca.pem"), "status", "a"}, 78, "TLS"},
		{"renew expired", nil, []string{"renew", "a", "--owner", "o", "--token", "1"}, 79, "not held"},
		{"break nothing", nil, []string{"break", "a", "--token", "1"}, 79, "no holder"},
		{"release missing is ok", nil, []string{"release", "a", "--owner", "o", "--token", "1"}, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := cli(t, ep, tt.env, tt.args...)
			if r.code != tt.want || !strings.Contains(r.stderr, tt.msg) {
				t.Errorf("exit %d, want %d; stderr %q (want it to mention %q)", r.code, tt.want, r.stderr, tt.msg)
			}
			if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic") {
				t.Errorf("stack trace on stderr: %s", r.stderr)
			}
			if n := strings.Count(strings.TrimSpace(r.stderr), "\n"); tt.msg != "" && n > 1 {
				t.Errorf("error is %d lines, want one (plus a usage hint):\n%s", n+1, r.stderr)
			}
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		r := cli(t, "127.0.0.1:1", nil, "--request-timeout", "500ms", "--dial-timeout", "500ms", "status", "a")
		if r.code != 69 || !strings.Contains(r.stderr, "cannot reach etcd") {
			t.Errorf("exit %d stderr %q, want 69", r.code, r.stderr)
		}
	})
	t.Run("json error", func(t *testing.T) {
		r := cli(t, ep, nil, "-w", "json", "renew", "a", "--owner", "o", "--token", "1")
		if r.code != 79 || !strings.HasPrefix(r.stderr, `{"error":`) || !strings.Contains(r.stderr, `"exit_code":79`) {
			t.Errorf("exit %d stderr %q", r.code, r.stderr)
		}
	})
	t.Run("json start failure", func(t *testing.T) {
		// One error object with its exit code, as every error: the
		// command that could not start is what ends the run.
		for _, tt := range []struct {
			cmd  string
			code int
		}{{filepath.Join(dir, "nope"), 127}, {dir, 126}} {
			r := cli(t, ep, nil, "-w", "json", "run", "a", "--", tt.cmd)
			var e struct {
				Error    string `json:"error"`
				ExitCode *int   `json:"exit_code"`
			}
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			err := json.Unmarshal([]byte(lines[len(lines)-1]), &e)
			if r.code != tt.code || err != nil || !strings.Contains(e.Error, "cannot start") || e.ExitCode == nil || *e.ExitCode != tt.code {
				t.Errorf("run %s: exit %d stderr %q; want %d and {\"error\": \"cannot start ...\", \"exit_code\": %[4]d}", tt.cmd, r.code, r.stderr, tt.code)
			}
		}
	})
	t.Run("timeout", func(t *testing.T) {
		hold := cliCommand(t, ep, nil, "run", "held", "--", "sleep", "3")
		if err := hold.Start(); err != nil {
			t.Fatal(err)
		}
		defer hold.Wait()
		cl := etcdtest.Client(t, ep)
		waitQueued(t, context.Background(), cl, "held", 1)
		r := cli(t, ep, nil, "run", "--timeout", "500ms", "held", "--", "true")
		if r.code != 124 || !strings.Contains(r.stderr, "timed out") || !strings.Contains(r.stderr, "held by") {
			t.Errorf("exit %d stderr %q, want 124 after a 'held by' note", r.code, r.stderr)
		}
	})
	t.Run("endpoint forms etcd's client dials", func(t *testing.T) {
		hostPort := strings.TrimPrefix(strings.TrimPrefix(ep, "http://"), "https://")
		if _, _, err := net.SplitHostPort(hostPort); err != nil {
			t.Fatal(err)
		}
		for _, form := range []string{hostPort, "http://" + hostPort, "http://" + hostPort + "/", "HTTP://" + hostPort, " " + hostPort + " ", hostPort + ", " + hostPort} {
			r := cli(t, form, nil, "status", "a")
			if r.code != 0 || !strings.Contains(r.stdout, "free") {
				t.Errorf("--endpoints %s: exit %d, stdout %q, stderr %q; want the name's status", form, r.code, r.stdout, r.stderr)
			}
		}
	})
	t.Run("endpoints from ETCDCTL_ENDPOINTS", func(t *testing.T) {
		cmd := exec.Command(cliPath, "--prefix", prefixOf(t), "status", "a")
		cmd.Env = append(cleanEnv(), "ETCDCTL_ENDPOINTS="+ep)
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "free") {
			t.Errorf("ETCDCTL_ENDPOINTS ignored: %v %s", err, out)
		}
		cmd = exec.Command(cliPath, "--prefix", prefixOf(t), "status", "a")
		cmd.Env = append(cleanEnv(), "ETCDCTL_ENDPOINTS=127.0.0.1:1", "ETCDLOCK_ENDPOINTS="+ep)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("ETCDLOCK_ENDPOINTS does not win over ETCDCTL_ENDPOINTS: %v %s", err, out)
		}
	})
}

func TestCLIScriptCommands(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	r := cli(t, ep, nil, "acquire", "cron", "--owner", "a", "--ttl", "30s")
	if r.code != 0 {
		t.Fatalf("acquire: %d %s", r.code, r.stderr)
	}
	vars := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		k, v, _ := strings.Cut(line, "=")
		vars[k] = v
	}
	tok := vars["ETCDLOCK_TOKEN"]
	if tok == "" || vars["ETCDLOCK_KEY"] == "" || vars["ETCDLOCK_LEASE"] == "" || vars["ETCDLOCK_DEADLINE"] == "" {
		t.Fatalf("acquire output %q", r.stdout)
	}
	if r := cli(t, ep, nil, "acquire", "cron", "--owner", "b"); r.code != 75 || !strings.Contains(r.stderr, "held by a") {
		t.Errorf("second acquire: %d %q", r.code, r.stderr)
	}
	if r := cli(t, ep, nil, "renew", "cron", "--owner", "a", "--token", tok); r.code != 0 {
		t.Errorf("renew: %d %q", r.code, r.stderr)
	}
	if r := cli(t, ep, []string{"ETCDLOCK_OWNER=a", "ETCDLOCK_TOKEN=" + tok}, "renew", "cron"); r.code != 0 {
		t.Errorf("renew from environment: %d %q", r.code, r.stderr)
	}
	if r := cli(t, ep, nil, "release", "cron", "--owner", "b", "--token", tok); r.code != 79 {
		t.Errorf("release by another owner: %d %q", r.code, r.stderr)
	}
	for range 2 { // release is safe to retry
		if r := cli(t, ep, nil, "release", "cron", "--owner", "a", "--token", tok); r.code != 0 {
			t.Errorf("release: %d %q", r.code, r.stderr)
		}
	}
	if r := cli(t, ep, nil, "renew", "cron", "--owner", "a", "--token", tok); r.code != 79 {
		t.Errorf("renew after release: %d %q", r.code, r.stderr)
	}
	// A stale owner cannot free a newer lock.
	r = cli(t, ep, nil, "-w", "json", "acquire", "cron", "--owner", "b")
	if r.code != 0 || !strings.Contains(r.stdout, `"owner":"b"`) {
		t.Fatalf("acquire by b: %d %q", r.code, r.stdout)
	}
	if r := cli(t, ep, nil, "release", "cron", "--owner", "a", "--token", tok); r.code != 0 {
		t.Errorf("stale release: %d %q", r.code, r.stderr)
	}
	if r := cli(t, ep, nil, "status", "cron"); !strings.Contains(r.stdout, "held by b") {
		t.Errorf("stale release freed b's lock: %q", r.stdout)
	}
	if r := cli(t, ep, nil, "list"); !strings.Contains(r.stdout, "cron") {
		t.Errorf("list: %q", r.stdout)
	}
	if r := cli(t, ep, nil, "leader", "cron"); !strings.HasPrefix(r.stdout, "b (token") {
		t.Errorf("leader: %q", r.stdout)
	}
}

// SIGTERM to etcdlock reaches the command, which exits with its own code;
// the lock is released.
func TestCLISignalForwardedAndLockReleased(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	dir := t.TempDir()
	ready, got := filepath.Join(dir, "ready"), filepath.Join(dir, "got")
	cmd := cliCommand(t, ep, nil, "run", "job", "--shell", "--",
		fmt.Sprintf(`trap 'echo TERM > %s; exit 7' TERM; touch %s; while :; do sleep 0.05; done`, got, ready))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	etcdtest.Eventually(t, 10*time.Second, func() bool { _, err := os.Stat(ready); return err == nil }, "child did not start")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("etcdlock exited with %v, want the child's 7", err)
	}
	if b, _ := os.ReadFile(got); strings.TrimSpace(string(b)) != "TERM" {
		t.Errorf("child did not receive SIGTERM")
	}
	if r := cli(t, ep, nil, "status", "job"); !strings.Contains(r.stdout, "free") {
		t.Errorf("lock not released: %q", r.stdout)
	}
}

// The lock is lost while the command runs (etcdlock is cut off from etcd):
// the command's whole process group — here a shell that ignores SIGTERM and
// a grandchild — is dead before anyone else acquires the lock, and etcdlock
// exits 79.
func TestCLILeaseLossKillsProcessGroup(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	p, proxyURL := etcdtest.Proxy(t, ep)
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	cmd := cliCommand(t, proxyURL, nil, "run", "job", "--ttl", "3s", "--kill-grace", "10s", "--shell", "--",
		fmt.Sprintf(`trap '' TERM; sleep 1000 & echo "$$ $!" > %s.tmp; mv %[1]s.tmp %[1]s; wait`, pids))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var procs []int
	etcdtest.Eventually(t, 10*time.Second, func() bool {
		b, err := os.ReadFile(pids)
		if err != nil {
			return false
		}
		for _, f := range strings.Fields(string(b)) {
			n, _ := strconv.Atoi(f)
			procs = append(procs, hostPID(t, cmd.Process.Pid, n))
		}
		return true
	}, "child did not start")

	// The next contender waits for the lock directly on etcd.
	next := cliCommand(t, ep, nil, "run", "job", "--shell", "--", fmt.Sprintf(`date +%%s%%N > %s/acquired`, dir))
	if err := next.Start(); err != nil {
		t.Fatal(err)
	}
	defer next.Wait()
	cut := time.Now()
	p.BlackholeTx()
	p.BlackholeRx()

	var dead time.Time
	etcdtest.Eventually(t, 20*time.Second, func() bool {
		for _, pid := range procs {
			if syscall.Kill(pid, 0) == nil && !isZombie(pid) {
				return false
			}
		}
		dead = time.Now()
		return true
	}, "the command's process group survived the lock loss")
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 79 {
		t.Errorf("etcdlock exited with %v, want 79; stderr:\n%s", err, stderr.String())
	}
	if err := next.Wait(); err != nil {
		t.Fatalf("next contender: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "acquired"))
	if err != nil {
		t.Fatal(err)
	}
	ns, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	acquired := time.Unix(0, ns)
	t.Logf("contact lost at 0; command group dead at %v; next holder acquired at %v (lead %v)",
		dead.Sub(cut).Round(time.Millisecond), acquired.Sub(cut).Round(time.Millisecond), acquired.Sub(dead).Round(time.Millisecond))
	if !dead.Before(acquired) {
		t.Errorf("command group still alive at %v when the next holder acquired at %v", dead, acquired)
	}
	if !strings.Contains(stderr.String(), "lost") {
		t.Errorf("stderr does not explain the loss: %s", stderr.String())
	}
}

// SIGINT while waiting for the lock ends the wait — etcdlock dies of
// SIGINT once it has cleaned up — and leaves no waiter key behind; the
// holder is undisturbed.
func TestCLIInterruptWhileWaiting(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	hold := cliCommand(t, ep, nil, "run", "job", "--", "sleep", "3")
	if err := hold.Start(); err != nil {
		t.Fatal(err)
	}
	defer hold.Wait()
	cl := etcdtest.Client(t, ep)
	waitQueued(t, context.Background(), cl, "job", 1)
	waiter := cliCommand(t, ep, nil, "run", "job", "--", "true")
	stderr := &lockedBuffer{}
	waiter.Stderr = stderr
	if err := waiter.Start(); err != nil {
		t.Fatal(err)
	}
	waitQueued(t, context.Background(), cl, "job", 2)
	// Interrupted once it has said whom it waits for.
	stderr.waitFor(t, "held by", 30*time.Second)
	if err := waiter.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := waiter.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !ee.Sys().(syscall.WaitStatus).Signaled() || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGINT {
		t.Fatalf("interrupted waiter ended with %v, want death by SIGINT; stderr %s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "held by") || !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("stderr %q: want the holder note and the interruption", stderr.String())
	}
	waitQueued(t, context.Background(), cl, "job", 1)
}

// `etcdlock dev` serves a real etcd on the address given, which the other
// commands can use, and stops cleanly on SIGTERM.
func TestCLIDevServer(t *testing.T) {
	t.Parallel()
	addr := etcdtest.FreeAddr(t)
	dev := exec.Command(cliPath, "dev", "--listen", addr, "--data-dir", t.TempDir())
	var out bytes.Buffer
	dev.Stdout = &out
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	defer dev.Process.Kill()
	etcdtest.Eventually(t, 20*time.Second, func() bool {
		return cli(t, addr, nil, "--request-timeout", "500ms", "status", "job").code == 0
	}, "dev server never answered")
	if r := cli(t, addr, nil, "run", "job", "--", "true"); r.code != 0 {
		t.Errorf("run against the dev server: %d %s", r.code, r.stderr)
	}
	if err := dev.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := dev.Wait(); err != nil {
		t.Errorf("dev server exit: %v", err)
	}
	if !strings.Contains(out.String(), "http://"+addr) {
		t.Errorf("dev printed %q, want its endpoint", out.String())
	}
	if r := cli(t, "127.0.0.1:1", nil, "dev", "--listen", "0.0.0.0:2379"); r.code == 0 {
		t.Errorf("dev accepted a non-loopback address")
	}
	// Alone in its directory, with no etcdlock-dev on PATH either: the
	// hint says how to get it from the source, which works.
	alone := filepath.Join(t.TempDir(), "etcdlock")
	if b, err := os.ReadFile(cliPath); err != nil || os.WriteFile(alone, b, 0o755) != nil {
		t.Fatalf("copy etcdlock: %v", err)
	}
	lone := exec.Command(alone, "dev", "--listen", "127.0.0.1:0")
	lone.Env = append(cleanEnv(), "PATH=/nonexistent")
	msg, _ := lone.CombinedOutput()
	if !strings.Contains(string(msg), "make build") || !strings.Contains(string(msg), "go install ./cmd/etcdlock-dev") || strings.Contains(string(msg), "@latest") {
		t.Errorf("dev without etcdlock-dev: %q; want how to build it from the source", msg)
	}
}

// acquire makes up a new owner for every call unless --owner names one on
// the command line: two overlapping runs of one script never both hold the
// lock, and a run that re-sends its own owner takes its grant over with a
// new token.
func TestCLIAcquireOwnerIsNewPerRun(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	grant := func(r cliResult) map[string]string {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("acquire: %d %s", r.code, r.stderr)
		}
		vars := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			k, v, _ := strings.Cut(line, "=")
			vars[k] = strings.Trim(v, "'")
		}
		return vars
	}
	first := grant(cli(t, ep, nil, "acquire", "nightly"))
	if !strings.Contains(first["ETCDLOCK_OWNER"], ":") {
		t.Fatalf("generated owner %q, want host:pid:random", first["ETCDLOCK_OWNER"])
	}
	for _, env := range [][]string{nil, {"ETCDLOCK_OWNER=" + first["ETCDLOCK_OWNER"]}} {
		r := cli(t, ep, env, "acquire", "nightly")
		if r.code != 75 || !strings.Contains(r.stderr, "held by "+first["ETCDLOCK_OWNER"]) {
			t.Errorf("overlapping acquire (env %q): %d %q, want 75 held by the first", env, r.code, r.stderr)
		}
	}
	if r := cli(t, ep, nil, "release", "nightly", "--owner", first["ETCDLOCK_OWNER"], "--token", first["ETCDLOCK_TOKEN"]); r.code != 0 {
		t.Fatalf("release with the printed owner: %d %s", r.code, r.stderr)
	}

	a := grant(cli(t, ep, nil, "acquire", "weekly", "--owner", "run-17"))
	b := grant(cli(t, ep, nil, "acquire", "weekly", "--owner", "run-17")) // the retry of a run whose output was lost
	ta, _ := strconv.ParseInt(a["ETCDLOCK_TOKEN"], 10, 64)
	tb, _ := strconv.ParseInt(b["ETCDLOCK_TOKEN"], 10, 64)
	if tb <= ta {
		t.Fatalf("retry under the same owner got token %d, want above %d", tb, ta)
	}
	if r := cli(t, ep, nil, "release", "weekly", "--owner", "run-17", "--token", a["ETCDLOCK_TOKEN"]); r.code != 0 {
		t.Errorf("late release of the replaced grant: %d %s", r.code, r.stderr)
	}
	if r := cli(t, ep, nil, "status", "weekly"); !strings.Contains(r.stdout, "token "+b["ETCDLOCK_TOKEN"]) {
		t.Errorf("the replaced grant's release freed the new one: %q", r.stdout)
	}
}
