//go:build linux

package integration

import (
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
)

// Nothing on the path that stops the command may wait for output or die
// of it: with etcdlock's stdout and stderr on a pipe whose reader is gone
// (`etcdlock run … 2>&1 | true`) or on one whose reader never reads (a
// stalled consumer, a terminal paused with Ctrl-S), etcdlock is killed
// and its guardian must still SIGKILL descendants that ignore SIGTERM.

// deadPipe is the write end of a pipe whose read end is closed.
func deadPipe(t *testing.T) *os.File {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	t.Cleanup(func() { w.Close() })
	return w
}

// fullPipe is the write end of a pipe that is full and whose reader
// never reads: every write to it blocks.
func fullPipe(t *testing.T) *os.File {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 4096)
	for {
		if _, err := unix.Write(p[1], chunk); err != nil {
			break // EAGAIN: full
		}
	}
	if err := unix.SetNonblock(p[1], false); err != nil {
		t.Fatal(err)
	}
	r, w := os.NewFile(uintptr(p[0]), "never read"), os.NewFile(uintptr(p[1]), "full")
	t.Cleanup(func() { r.Close(); w.Close() })
	return w
}

func TestCLIStopsCommandWithoutOutput(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		out  func(*testing.T) *os.File
	}{
		{"reader gone", deadPipe},
		{"reader never reads", fullPipe},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := runGuardedTo(t, shared.Endpoints()[0], tt.out(t), "trap '' TERM\n"+leaveBehind+"wait", "--ttl", "3s", "--kill-grace", "1m")
			next := nextHolder(t, g)
			if err := g.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			h := <-next
			h.check(t)
			g.deadAt(t, 10*time.Second)
		})
	}
}

// etcdlock's own notes and errors on a stderr whose reader is gone do not
// kill it: a wait that times out still exits 124.
func TestCLIOutputReaderGoneExitCode(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	dir := t.TempDir()
	holdingRun(t, ep, dir, "a", "job")
	etcdtest.Eventually(t, 20*time.Second, func() bool { return running(dir, "a") != "" }, "holder never ran")
	cmd := cliCommand(t, ep, nil, "run", "job", "--timeout", "2s", "--", "true")
	out := deadPipe(t)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); exitCodeOf(err) != 124 {
		t.Errorf("waiter with its output gone: %v, want exit 124", err)
	}
}

// etcdlock's own notes and errors never hold up the loss: with stderr on
// a pipe that is full and never read, a run cut off from etcd still stops
// its command and exits 79 (its last words are dropped after a bound).
func TestCLILossWithStalledStderr(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	p, proxyURL := etcdtest.Proxy(t, ep)
	dir := t.TempDir()
	ran := dir + "/ran"
	cmd := cliCommand(t, proxyURL, nil, "run", "job", "--ttl", "3", "sh", "-c", "touch "+ran+"; exec sleep 100")
	cmd.Stderr = fullPipe(t)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	etcdtest.Eventually(t, 20*time.Second, func() bool { _, err := os.Stat(ran); return err == nil }, "the command did not start")
	p.BlackholeTx()
	p.BlackholeRx()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if code := exitCodeOf(err); code != 79 {
			t.Errorf("exit %v, want 79", err)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		t.Fatal("etcdlock did not exit after the loss: it waits on its stderr")
	}
}
