package integration

import (
	"bufio"
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// `etcdlock dev --help` lists dev's own flags, not etcdlock's global ones,
// which do not apply to it; a command line dev cannot serve is a usage
// error (64), as the exit-code table says, not a configuration error.
func TestCLIDevFlags(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(cliPath, "dev", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("dev --help: %v\n%s", err, out)
	}
	for _, f := range []string{"--data-dir", "--listen", "--members", "--log-level"} {
		if !strings.Contains(string(out), "\n      "+f+" ") {
			t.Errorf("dev --help does not list %s:\n%s", f, out)
		}
	}
	for _, f := range []string{"--endpoints", "--request-timeout", "Global Flags"} {
		if strings.Contains(string(out), f) {
			t.Errorf("dev --help lists %s, which does not apply to dev:\n%s", f, out)
		}
	}
	for _, tt := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--listen", "127.0.0.1:0", "--members", "3"}, "--listen"},
		{[]string{"--members", "0"}, "--members"},
		{[]string{"--log-level", "loud"}, "--log-level"},
		{[]string{"--bogus"}, "unknown flag"},
		{[]string{"extra"}, "extra"},
		// Not a loopback IP with a port: localhost too, which may resolve
		// to 127.0.0.1 for etcd and to ::1 for a client.
		{[]string{"--listen", "0.0.0.0:0"}, "not a loopback IP"},
		{[]string{"--listen", "10.0.0.1:2379"}, "not a loopback IP"},
		{[]string{"--listen", "localhost:0"}, "not a loopback IP"},
		{[]string{"--listen", "127.0.0.1"}, "not host:port"},
		{[]string{"--listen", "127.0.0.1:99999"}, "0 to 65535"},
		{[]string{"--listen", ""}, "not host:port"},
	} {
		cmd := exec.Command(cliPath, append([]string{"dev"}, tt.args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Run(); exitCodeOf(err) != 64 || !strings.Contains(stderr.String(), tt.msg) {
			t.Errorf("dev %q: %v, stderr %q; want exit 64 naming %q", tt.args, err, stderr.String(), tt.msg)
		}
	}
}

// A second `etcdlock dev` on a data directory that a running one serves
// fails at once, saying so (etcd alone would wait for its files' locks,
// silent and deaf to SIGTERM); the first one keeps serving. A runtime.GC
// in the first would not free its lock: the check holds for as long as
// the first runs, which the second attempt, made after a while, shows.
func TestCLIDevDataDirInUse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := exec.Command(cliPath, "dev", "--data-dir", dir, "--listen", "127.0.0.1:0")
	out, err := first.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = first.Process.Signal(syscall.SIGTERM); _ = first.Wait() }()
	ep, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the first dev printed no endpoint: %v", err)
	}
	ep = strings.TrimSpace(ep)
	for attempt := range 2 {
		if attempt > 0 {
			time.Sleep(3 * time.Second) // the first has run a while: long enough for a GC to free an unreferenced lock file
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		second := exec.CommandContext(ctx, cliPath, "dev", "--data-dir", dir, "--listen", "127.0.0.1:0")
		msg, err := second.CombinedOutput()
		timedOut := ctx.Err() != nil
		cancel()
		if timedOut {
			t.Fatalf("attempt %d: a second dev on the data dir in use still ran after a minute: %s", attempt, msg)
		}
		if err == nil || !strings.Contains(string(msg), "in use by another etcdlock dev") {
			t.Errorf("attempt %d: second dev: %v %q; want a failure saying the data dir is in use", attempt, err, msg)
		}
	}
	if r := cli(t, ep, nil, "run", "job", "--", "true"); r.code != 0 {
		t.Errorf("the first dev stopped serving: run %d %s", r.code, r.stderr)
	}
}
