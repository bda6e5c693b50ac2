package integration

import (
	"bufio"
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
	dev := exec.Command(cliPath, "dev", "--members", "3")
	out, err := dev.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = dev.Process.Kill(); _ = dev.Wait() }()
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
		case l := <-lines:
			return l
		case <-time.After(60 * time.Second):
			t.Fatal("etcdlock dev --members 3 printed nothing for 60 s")
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
