package integration

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
)

// A call to an etcd that stopped answering (frozen, as SIGSTOP freezes
// it) fails once --request-timeout has passed, with exit 69 and the reason,
// found while the request waited: the endpoint accepts connections but does
// not answer. No request is retried or followed by another: a frozen etcd
// would answer none of them, and each would add its own timeout.
func TestCLIFrozenEtcd(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	for _, args := range [][]string{
		{"status", "job"},
		{"acquire", "job"},
		{"release", "job", "--owner", "o", "--token", "5"},
		{"run", "job", "--", "true"},
		{"run", "--try", "job", "--", "true"},
	} {
		t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
			f := newFreezer(t, ep, "")
			began := time.Now()
			r := cli(t, f.addr(), nil, append([]string{"--request-timeout", "1s"}, args...)...)
			took := time.Since(began)
			if r.code != 69 || !strings.Contains(r.stderr, "does not answer") {
				t.Errorf("%q: exit %d, stderr %q; want 69 saying that etcd does not answer", args, r.code, r.stderr)
			}
			if calls := f.callsOnceFrozen(); len(calls) != 1 {
				t.Errorf("%q: calls sent to the frozen etcd %q, want the one that found it frozen", args, calls)
			}
			if took >= 3*time.Second {
				t.Errorf("%q took %v with --request-timeout 1s", args, took)
			}
		})
	}
}

// A run whose try finds etcd frozen cleans up that try (bounded by
// --request-timeout) and revokes nothing: the revoke would wait another
// timeout for no answer; the lease expires within --ttl.
func TestCLIFrozenEtcdDuringTry(t *testing.T) {
	t.Parallel()
	f := newFreezer(t, shared.Endpoints()[0], "/etcdserverpb.KV/Txn")
	r := cli(t, f.addr(), nil, "--request-timeout", "1s", "run", "--try", "job", "--", "true")
	if r.code != 69 || !strings.Contains(r.stderr, "does not answer") {
		t.Errorf("exit %d, stderr %q; want 69 saying that etcd does not answer", r.code, r.stderr)
	}
	txns := 0
	for _, c := range f.callsOnceFrozen() {
		switch c {
		case "/etcdserverpb.KV/Txn":
			txns++ // the try, then its clean-up
		case "/etcdserverpb.Lease/LeaseKeepAlive": // the session's renewals, in the background
		default:
			t.Errorf("call %s sent to the frozen etcd", c)
		}
	}
	if txns > 2 {
		t.Errorf("%d transactions sent to the frozen etcd, want the try and its clean-up", txns)
	}
	// The endpoint is probed while the try waits (from half its
	// --request-timeout), so that the reason is known when it fails: a
	// probe after the clean-up would add its own wait.
	if p := f.probesOnceFrozen(); len(p) != 1 || p[0] != 1 {
		t.Errorf("probes of the frozen etcd came after %v calls, want one probe while the try waits (after 1 call)", p)
	}
}

// callsOtherThan fails the test for each call sent to a frozen etcd that
// is not in allowed, or more often than allowed says. The streams may
// always open: the session's renewals, and a waiter's watch, which the
// client opens when it gets to it (a run frozen just as it starts to wait
// opens it after the freeze); neither is a request with a deadline.
func callsOtherThan(t *testing.T, f *freezer, allowed map[string]int) {
	t.Helper()
	sent := map[string]int{}
	for _, c := range f.callsOnceFrozen() {
		if c == "/etcdserverpb.Lease/LeaseKeepAlive" || c == "/etcdserverpb.Watch/Watch" {
			continue
		}
		if sent[c]++; sent[c] > allowed[c] {
			t.Errorf("call %s sent to the frozen etcd (calls once frozen: %q)", c, f.callsOnceFrozen())
		}
	}
}

// A run whose wait for a holder ends at --timeout while etcd is frozen
// sends the clean-up of its wait, which gets no answer, and nothing after
// it: no revoke, which would wait another --request-timeout for nothing.
// It exits 124 all the same.
func TestCLIFrozenEtcdWhileWaiting(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	name := fmt.Sprintf("held-%d", time.Now().UnixNano()) // its holder's lease outlives the test
	if r := cli(t, ep, nil, "acquire", name, "--owner", "holder"); r.code != 0 {
		t.Fatalf("acquire: %d %s", r.code, r.stderr)
	}
	f := newFreezer(t, ep, onDemand)
	errFile := filepath.Join(t.TempDir(), "stderr")
	out, err := os.Create(errFile)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd := cliCommand(t, f.addr(), nil, "--request-timeout", "1s", "run", "--timeout", "3", name, "--", "true")
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	etcdtest.Eventually(t, 10*time.Second, func() bool {
		b, _ := os.ReadFile(errFile)
		return strings.Contains(string(b), "waiting for lock")
	}, "the run did not say that it waits")
	f.freeze()
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 124 {
		b, _ := os.ReadFile(errFile)
		t.Errorf("exit %v, stderr %q; want 124", err, b)
	}
	callsOtherThan(t, f, map[string]int{"/etcdserverpb.KV/Txn": 1}) // the wait's clean-up
}

// A run whose check that it held its lock throughout, once its command
// has exited, gets no answer from a frozen etcd sends nothing after it:
// no revoke. The command's own status stands, with notes that the lock
// could not be confirmed nor released.
func TestCLIFrozenEtcdAfterCommand(t *testing.T) {
	t.Parallel()
	f := newFreezer(t, shared.Endpoints()[0], onDemand)
	// Frozen once the session watches its key (a watch stream it opens
	// in the background, 100 ms after the acquisition).
	p := startPaused(t, f.addr(), 3, func() bool { return f.sent("/etcdserverpb.Watch/Watch") }, "--request-timeout", "1s", "run", "X")
	f.freeze()
	if code, stderr := p.finish(t); code != 3 || !strings.Contains(stderr, "could not confirm") {
		t.Errorf("exit %d, stderr %q; want 3 with a note that the lock could not be confirmed", code, stderr)
	}
	callsOtherThan(t, f, map[string]int{"/etcdserverpb.KV/Txn": 1}) // the check
}

// A run that keeps its lock makes four requests, one name or several: the
// lease, the acquisition, the check once the command has exited (which
// also catches a key overwritten without the lease) and the revoke that
// releases. (The renewals and the key watch are streams opened in the
// background, when the run lasts long enough. On a loaded machine an
// acquisition can take longer than the 250 ms after which a run reads who
// holds the name, to say whom it waits for: one more read, a Txn.)
func TestCLIRunRequests(t *testing.T) {
	t.Parallel()
	want := []string{"/etcdserverpb.Lease/LeaseGrant", "/etcdserverpb.KV/Txn", "/etcdserverpb.KV/Txn", "/etcdserverpb.Lease/LeaseRevoke"}
	for _, names := range [][]string{{"one"}, {"one", "two"}} {
		f := newFreezer(t, shared.Endpoints()[0], onDemand)
		if r := cli(t, f.addr(), nil, append(append([]string{"run"}, names...), "--", "true")...); r.code != 0 {
			t.Fatalf("run %q: exit %d %s", names, r.code, r.stderr)
		}
		got := slices.DeleteFunc(f.allCalls(), func(c string) bool {
			return c == "/etcdserverpb.Lease/LeaseKeepAlive" || c == "/etcdserverpb.Watch/Watch"
		})
		slow := slices.Insert(slices.Clone(want), 2, "/etcdserverpb.KV/Txn")
		if !slices.Equal(got, want) && !slices.Equal(got, slow) {
			t.Errorf("run %q made the requests %q, want %q", names, got, want)
		}
	}
}
