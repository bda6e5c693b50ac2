package integration

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"

	"github.com/etcdlock/etcdlock/pkg/embedded"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
)

// An etcd that cannot be reached is reported with the reason, not as a
// deadline: a refused connection or an unknown host exits 69, TLS that
// does not match the server's exits 78.
func TestCLIUnreachableReasons(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, other := newCA(t, dir), newCA(t, t.TempDir())
	srvCert, srvKey := ca.issue(t, dir, "server", true)
	c := etcdtest.Cluster(t, embedded.WithClientTLS(transport.TLSInfo{CertFile: srvCert, KeyFile: srvKey}))
	tlsEP := c.Endpoints()[0]
	plainEP := strings.TrimPrefix(strings.TrimPrefix(shared.Endpoints()[0], "http://"), "https://")
	fast := []string{"--request-timeout", "1s", "--dial-timeout", "1s"}
	for _, tt := range []struct {
		name, ep string
		flags    []string
		code     int
		msg      string
	}{
		{"connection refused", "127.0.0.1:1", nil, 69, "connection refused"},
		{"unknown host", "etcd.invalid:2379", nil, 69, "etcd.invalid"},
		{"TLS to a plain server", plainEP, []string{"--cacert", ca.file}, 78, "does not speak TLS"},
		{"plain to a TLS server", strings.TrimPrefix(tlsEP, "https://"), nil, 78, "speaks TLS"},
		{"an unknown CA", tlsEP, []string{"--cacert", other.file}, 78, "certificate"},
		{"https without the CA", tlsEP, nil, 78, "certificate"},
		{"http:// to a TLS server, with the CA", strings.Replace(tlsEP, "https://", "http://", 1), []string{"--cacert", ca.file}, 78, "speaks TLS: give https://"},
		{"HTTPS without the CA", strings.Replace(tlsEP, "https://", "HTTPS://", 1), nil, 78, "certificate"},
		{"a socket that is not there", "unix:" + filepath.Join(dir, "none.sock"), nil, 69, "dial unix"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := cli(t, tt.ep, nil, append(append(append([]string{}, fast...), tt.flags...), "status", "job")...)
			if r.code != tt.code || !strings.Contains(r.stderr, tt.msg) {
				t.Errorf("exit %d, stderr %q; want %d naming %q", r.code, r.stderr, tt.code, tt.msg)
			}
		})
	}
	// leader --watch has its first line within --request-timeout too.
	if r := cli(t, "127.0.0.1:1", nil, append(fast, "leader", "--watch", "job")...); r.code != 69 || !strings.Contains(r.stderr, "connection refused") {
		t.Errorf("leader --watch of an etcd that refuses connections: exit %d, stderr %q; want 69 naming the refusal", r.code, r.stderr)
	}
	for _, ep := range []string{tlsEP, strings.Replace(tlsEP, "https://", "HTTPS://", 1)} {
		if r := cli(t, ep, nil, "--cacert", ca.file, "status", "job"); r.code != 0 {
			t.Errorf("%s with the right CA: exit %d %s", ep, r.code, r.stderr)
		}
	}
}

// Progress on stderr at the default level, none with -q: a waiting set
// says what it waits for and when it acquires; a run says that it waits
// out a lock-delay; a holder says that renewals fail before the loss.
func TestCLIProgressNotes(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	t.Run("set", func(t *testing.T) {
		dir := t.TempDir()
		for _, quiet := range []bool{false, true} {
			id := fmt.Sprint("eu-", quiet)
			startedRun(t, ep, dir, id, "db-eu")
			args := []string{"run", "db-us", "db-eu", "--", "true"}
			if quiet {
				args = append([]string{"-q"}, args...)
			}
			w := cliCommand(t, ep, nil, args...)
			var stderr lockedBuffer
			w.Stderr = &stderr
			if err := w.Start(); err != nil {
				t.Fatal(err)
			}
			waitQueued(t, testCtx(t, time.Minute), etcdtest.Client(t, ep), "db-us", 1)
			if !quiet {
				// The note comes while the holder holds.
				etcdtest.Eventually(t, 20*time.Second, func() bool { return strings.Contains(stderr.String(), `waiting for lock "db-eu"`) }, "no waiting note")
			}
			if err := os.WriteFile(filepath.Join(dir, id+".stop"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := w.Wait(); err != nil {
				t.Fatal(err)
			}
			if got := stderr.String(); quiet != (got == "") || !quiet && !strings.Contains(got, "acquired lock") {
				t.Errorf("-q %v: stderr %q", quiet, got)
			}
		}
	})
	t.Run("lock-delay", func(t *testing.T) {
		dir := t.TempDir()
		holder := startedRun(t, ep, dir, "h", "job", "--lock-delay", "2s", "--ttl", "2")
		if err := holder.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		r := cli(t, ep, nil, "run", "job", "--lock-delay", "2s", "--", "true")
		if r.code != 0 || !strings.Contains(r.stderr, "waiting out the lock-delay") {
			t.Errorf("run after a killed holder: exit %d, stderr %q; want a lock-delay note", r.code, r.stderr)
		}
	})
	t.Run("renewals", func(t *testing.T) {
		p, proxyURL := etcdtest.Proxy(t, ep)
		dir := t.TempDir()
		h := cliCommand(t, proxyURL, nil, "run", "job", "--ttl", "4", "sh", "-c", "touch "+filepath.Join(dir, "ran")+"; sleep 100")
		var stderr lockedBuffer
		h.Stderr = &stderr
		if err := h.Start(); err != nil {
			t.Fatal(err)
		}
		etcdtest.Eventually(t, 20*time.Second, func() bool { _, err := os.Stat(filepath.Join(dir, "ran")); return err == nil }, "the command did not start")
		p.BlackholeTx()
		p.BlackholeRx()
		if err := h.Wait(); exitCodeOf(err) != 79 {
			t.Errorf("exit %v, want 79", err)
		}
		got := stderr.String()
		failed, lost := strings.Index(got, "renewals of the lease are failing"), strings.Index(got, "lost")
		if failed < 0 || lost < 0 || failed > lost {
			t.Errorf("stderr %q: want a failing renewal noted before the loss", got)
		}
	})
}

// A read right after the leader is killed waits for the next leader
// within --request-timeout rather than failing with etcd's "leader
// changed" (exit 1); with most members down, it exits 69 and names the
// member that answers without a leader.
func TestCLIReadsAcrossALeaderLoss(t *testing.T) {
	t.Parallel()
	c := chaosCluster(t)
	eps := strings.Join(c.Endpoints(), ",")
	if r := cli(t, eps, nil, "acquire", "job", "--owner", "a"); r.code != 0 {
		t.Fatalf("acquire: exit %d %s", r.code, r.stderr)
	}
	for round := range 3 {
		leader, err := c.Leader(testCtx(t, 10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		leader.HardStop()
		for _, args := range [][]string{{"status", "job"}, {"list"}, {"leader", "job"}} {
			if r := cli(t, eps, nil, append([]string{"--request-timeout", "20s"}, args...)...); r.code != 0 || !strings.Contains(r.stdout, "job") && args[0] != "leader" {
				t.Errorf("round %d, %v right after the leader was killed: exit %d, stdout %q, stderr %q; want the answer", round, args, r.code, r.stdout, r.stderr)
			}
		}
		if err := leader.Restart(testCtx(t, 30*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	ms := c.Members()
	ms[0].HardStop()
	ms[1].HardStop()
	r := cli(t, eps, nil, "--request-timeout", "2s", "status", "job")
	if want := ms[2].Endpoint() + " answers but has no leader"; r.code != 69 || !strings.Contains(r.stderr, want) {
		t.Errorf("status with two of three members down: exit %d, stderr %q; want 69 saying %q", r.code, r.stderr, want)
	}
}

// A read interrupted while etcd does not answer dies of the signal, as a
// shell expects; it prints no error. leader --watch ends quietly, exit 0.
func TestCLIReadsInterruptedWhileWaiting(t *testing.T) {
	t.Parallel()
	silent, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	for _, args := range [][]string{{"status", "job"}, {"list"}, {"leader", "job"}, {"leader", "--watch", "job"}} {
		cmd := cliCommand(t, silent.Addr().String(), nil, append([]string{"--request-timeout", "30s"}, args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		died := ws.Signaled() && ws.Signal() == syscall.SIGINT
		if slices.Contains(args, "--watch") {
			if err != nil || stderr.Len() != 0 {
				t.Errorf("%v interrupted: %v, stderr %q; want exit 0, quietly", args, err, stderr.String())
			}
			continue
		}
		if !died || stderr.Len() != 0 {
			t.Errorf("%v interrupted: %v, stderr %q; want death by SIGINT, quietly", args, err, stderr.String())
		}
	}
}
