package integration

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
)

// Lock names written as paths are separate locks from their parents, in
// every command that takes a name.
func TestCLINamesWithSlashes(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	if r := cli(t, ep, nil, "acquire", "jobs/nightly", "--owner", "a", "--ttl", "30s"); r.code != 0 {
		t.Fatalf("acquire jobs/nightly: %d %s", r.code, r.stderr)
	}
	if r := cli(t, ep, nil, "run", "--try", "jobs", "--", "true"); r.code != 0 {
		t.Errorf("run --try jobs while jobs/nightly is held: %d %s", r.code, r.stderr)
	}
	if r := cli(t, ep, nil, "run", "--try", "jobs/nightly", "--", "true"); r.code != 75 || !strings.Contains(r.stderr, `"jobs/nightly" is held by a`) {
		t.Errorf("run --try jobs/nightly: %d %q, want 75 held by a", r.code, r.stderr)
	}
	if r := cli(t, ep, nil, "status", "jobs"); !strings.Contains(r.stdout, "free") {
		t.Errorf("status jobs: %q", r.stdout)
	}
	if r := cli(t, ep, nil, "status", "jobs/nightly"); !strings.Contains(r.stdout, "held by a") {
		t.Errorf("status jobs/nightly: %q", r.stdout)
	}
	if r := cli(t, ep, nil, "list", "jobs/"); !strings.Contains(r.stdout, "jobs/nightly") || strings.Contains(r.stdout, "%2F") {
		t.Errorf("list jobs/: %q", r.stdout)
	}
}

// A holder written by etcd's own lock client (as etcdctl lock writes it)
// is named for what it is, with its lease and remaining TTL.
func TestCLIForeignHolder(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	cli0 := etcdtest.Client(t, ep)
	es, err := concurrency.NewSession(cli0, concurrency.WithTTL(30))
	if err != nil {
		t.Fatal(err)
	}
	defer es.Close()
	if err := concurrency.NewMutex(es, prefixOf(t)+"ext").Lock(testCtx(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	lease := fmt.Sprintf("%x", int64(es.Lease()))
	r := cli(t, ep, nil, "status", "ext")
	if !strings.Contains(r.stdout, "etcdctl lock") || !strings.Contains(r.stdout, "lease "+lease) || !strings.Contains(r.stdout, "s left") {
		t.Errorf("status of a foreign holder: %q", r.stdout)
	}
	if r := cli(t, ep, nil, "run", "--try", "ext", "--", "true"); r.code != 75 || !strings.Contains(r.stderr, "etcdctl lock") || !strings.Contains(r.stderr, lease) {
		t.Errorf("run --try: %d %q", r.code, r.stderr)
	}
	// The wait outlasts the note (after 250 ms) and its lease lookup by
	// seconds, however loaded the machine: the lookup ends with the wait.
	if r := cli(t, ep, nil, "run", "--timeout", "3s", "ext", "--", "true"); r.code != 124 ||
		!strings.Contains(r.stderr, "waiting for lock \"ext\": held by a key without an etcdlock record") ||
		!strings.Contains(r.stderr, "lease "+lease) || !strings.Contains(r.stderr, "s left") || strings.Contains(r.stderr, "since") {
		t.Errorf("run waiting: %d %q", r.code, r.stderr)
	}
	if r := cli(t, ep, nil, "list"); !strings.Contains(r.stdout, "no etcdlock record") {
		t.Errorf("list: %q", r.stdout)
	}
	if r := cli(t, ep, nil, "-w", "json", "status", "ext"); !strings.Contains(r.stdout, `"foreign":true`) {
		t.Errorf("status -w json: %q", r.stdout)
	}
}

// leader --watch prints the leader on every change until interrupted.
func TestCLILeaderWatch(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	w := cliCommand(t, ep, nil, "leader", "job", "--watch")
	out := &lockedBuffer{}
	w.Stdout = out
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	lines := func(n int, last string) func() bool {
		return func() bool {
			l := strings.Split(strings.TrimSpace(out.String()), "\n")
			return len(l) == n && strings.HasPrefix(l[n-1], last)
		}
	}
	etcdtest.Eventually(t, 20*time.Second, lines(1, "none"), "no first report")
	r := cli(t, ep, nil, "acquire", "job", "--owner", "w1")
	if r.code != 0 {
		t.Fatal(r.stderr)
	}
	etcdtest.Eventually(t, 10*time.Second, lines(2, "w1 (token"), "the new leader was not reported")
	var tok string
	for _, line := range strings.Split(r.stdout, "\n") {
		if v, ok := strings.CutPrefix(line, "ETCDLOCK_TOKEN="); ok {
			tok = v
		}
	}
	if r := cli(t, ep, nil, "release", "job", "--owner", "w1", "--token", tok); r.code != 0 {
		t.Fatal(r.stderr)
	}
	etcdtest.Eventually(t, 10*time.Second, lines(3, "none"), "the release was not reported")
	if err := w.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := w.Wait(); err != nil {
		t.Errorf("leader --watch after SIGINT: %v; output:\n%s", err, out)
	}
}
