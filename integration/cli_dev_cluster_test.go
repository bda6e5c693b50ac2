package integration

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
)

// `etcdlock dev --members 3` runs a cluster of three member processes:
// locks work through it, a killed member leaves a cluster that still
// serves, and SIGTERM stops every member process.
func TestCLIDevCluster(t *testing.T) {
	t.Parallel()
	dev, eps, pids := startDevCluster(t, "--members", "3")
	token := func() int {
		t.Helper()
		r := cli(t, eps, nil, "run", "job", "--", "sh", "-c", `echo "$ETCDLOCK_TOKEN"`)
		if r.code != 0 {
			t.Fatalf("run through the cluster: %d %s", r.code, r.stderr)
		}
		tok, err := strconv.Atoi(strings.TrimSpace(r.stdout))
		if err != nil {
			t.Fatalf("token %q: %v", r.stdout, err)
		}
		return tok
	}
	before := token()
	if err := syscall.Kill(pids["m0"], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var after int
	etcdtest.Eventually(t, 30*time.Second, func() bool {
		r := cli(t, eps, nil, "--request-timeout", "2s", "run", "job", "--", "sh", "-c", `echo "$ETCDLOCK_TOKEN"`)
		after, _ = strconv.Atoi(strings.TrimSpace(r.stdout))
		return r.code == 0
	}, "the cluster stopped serving locks after one member was killed")
	if after <= before {
		t.Errorf("token after the member's death %d, want above %d", after, before)
	}
	if err := dev.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := dev.Wait(); err != nil {
		t.Errorf("dev exit: %v", err)
	}
	for name, pid := range pids {
		etcdtest.Eventually(t, 15*time.Second, func() bool { return syscall.Kill(pid, 0) != nil },
			"member "+name+" outlived etcdlock dev")
	}
}

// startDevCluster starts `etcdlock dev` with args, a cluster of three
// members, and returns it with its endpoints (comma-separated) and each
// member's pid by name, once it serves. The test's end kills it.
func startDevCluster(t *testing.T, args ...string) (*exec.Cmd, string, map[string]int) {
	t.Helper()
	dev := exec.Command(cliPath, append([]string{"dev"}, args...)...)
	out, err := dev.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dev.Process.Kill(); _ = dev.Wait() })
	lines := make(chan string, 8)
	go func() {
		defer close(lines)
		s := bufio.NewScanner(out)
		for s.Scan() {
			lines <- s.Text()
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	next := func() string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("etcdlock dev %v exited before it served", args)
			}
			return l
		case <-time.After(60 * time.Second):
			t.Fatalf("etcdlock dev %v printed nothing for 60 s", args)
		}
		return ""
	}
	eps := next()
	if n := len(strings.Split(eps, ",")); n != 3 {
		t.Fatalf("first line %q: want 3 endpoints", eps)
	}
	pids := map[string]int{}
	for range 3 {
		f := strings.Fields(next())
		if len(f) != 3 {
			t.Fatalf("member line %q: want name pid endpoint", f)
		}
		pid, err := strconv.Atoi(f[1])
		if err != nil || !strings.Contains(eps, f[2]) {
			t.Fatalf("member line %q: bad pid or endpoint", f)
		}
		pids[f[0]] = pid
	}
	return dev, eps, pids
}

// `etcdlock dev --members 3 --data-dir D`, stopped and started again,
// serves the same cluster on its data: its members get back the peer
// ports their data names (without them, they never find each other and
// the command waits without a word). The directory refuses another
// number of members, or a single member.
func TestCLIDevClusterRestartsOnItsData(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	token := func(eps string) int {
		t.Helper()
		r := cli(t, eps, nil, "run", "job", "--", "sh", "-c", `echo "$ETCDLOCK_TOKEN"`)
		tok, err := strconv.Atoi(strings.TrimSpace(r.stdout))
		if r.code != 0 || err != nil {
			t.Fatalf("run through the cluster: %d %q %s", r.code, r.stdout, r.stderr)
		}
		return tok
	}
	dev, eps, _ := startDevCluster(t, "--members", "3", "--data-dir", dir)
	var last int
	for range 5 { // a new cluster's first token would be below the last
		last = token(eps)
	}
	if err := dev.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := dev.Wait(); err != nil {
		t.Fatalf("dev exit: %v", err)
	}
	first := eps
	dev, eps, _ = startDevCluster(t, "--members", "3", "--data-dir", dir)
	if eps != first {
		t.Errorf("endpoints after the restart %s, want the first run's %s", eps, first)
	}
	if tok := token(eps); tok <= last {
		t.Errorf("token after the restart %d, want above %d: the cluster's data is not the first run's", tok, last)
	}
	// While it runs, another cluster on the directory fails at once.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	msg, err := exec.CommandContext(ctx, cliPath, "dev", "--members", "3", "--data-dir", dir).CombinedOutput()
	cancel()
	if err == nil || !strings.Contains(string(msg), "in use by another etcdlock dev") {
		t.Errorf("a second cluster on the directory in use: %v %q; want a failure saying so", err, msg)
	}
	// Killed, its members take seconds to stop: a restart at once waits
	// for them, rather than have its own members refused.
	if err := dev.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = dev.Wait()
	dev, eps, _ = startDevCluster(t, "--members", "3", "--data-dir", dir)
	if eps != first {
		t.Errorf("endpoints after a restart that followed SIGKILL %s, want %s", eps, first)
	}
	if err := dev.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := dev.Wait(); err != nil {
		t.Fatalf("dev exit: %v", err)
	}
	for _, args := range [][]string{{"--members", "5"}, {"--listen", "127.0.0.1:0"}} {
		cmd := exec.Command(cliPath, append([]string{"dev", "--data-dir", dir}, args...)...)
		msg, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 78 || !strings.Contains(string(msg), "holds a 3-member cluster: start it with --members 3") {
			t.Errorf("dev %v on the 3-member cluster's data: %v %q; want exit 78 saying --members 3", args, err, msg)
		}
	}
	// And a single member's data refuses --members.
	single := t.TempDir()
	one := exec.Command(cliPath, "dev", "--data-dir", single, "--listen", "127.0.0.1:0")
	out, err := one.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := one.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = one.Process.Kill(); _ = one.Wait() })
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatalf("the single member printed no endpoint: %v", err)
	}
	if err := one.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = one.Wait()
	msg, err = exec.Command(cliPath, "dev", "--data-dir", single, "--members", "3").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 78 || !strings.Contains(string(msg), "holds a single member's data") {
		t.Errorf("dev --members 3 on a single member's data: %v %q; want exit 78 saying so", err, msg)
	}
}
