package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// A run whose lock is broken while its command runs exits 79, whatever the
// command's own status, even when the command broke the lock itself and
// exited before the session heard of the loss from its watch.
func TestCLIRunBrokenByItsCommand(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	// The command breaks its own lock (break reads ETCDLOCK_TOKEN, the
	// grant of ETCDLOCK_NAME), then exits at once with $4.
	script := `"$1" --endpoints "$2" --prefix "$3" break job >/dev/null || exit 99; exit "$4"`
	for round := range 6 {
		status := []string{"0", "3"}[round%2]
		r := cli(t, ep, nil, "run", "job", "--", "sh", "-c", script, "sh", cliPath, ep, prefixOf(t), status)
		if r.code != 79 || !strings.Contains(r.stderr, "lost while the command ran") {
			t.Fatalf("round %d, command exit %s: exit %d, stderr %q; want 79", round, status, r.code, r.stderr)
		}
	}
	if r := cli(t, ep, nil, "run", "job", "--", "true"); r.code != 0 {
		t.Errorf("a run that keeps its lock: exit %d %s", r.code, r.stderr)
	}
}

// A command that overwrites its own lock's key with a put of its own (no
// lease, the same create revision) has lost the lock, as a break request
// does: the run stops it, exits 79 and deletes the key, which would
// otherwise outlive the run's lease and block the name until someone
// breaks it.
func TestCLIRunOverwrittenByItsCommand(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	cl := etcdtest.Client(t, ep)
	p := startPaused(t, ep, 0, nil, "run", "r4")
	if _, err := cl.Put(context.Background(), p.key, "junk"); err != nil {
		t.Fatal(err)
	}
	// Seen by the run's watch while the command runs, or by its read
	// once the command has exited, whichever comes first.
	if code, stderr := p.finish(t); code != 79 || !strings.Contains(stderr, "written by someone else") && !strings.Contains(stderr, "overwritten") {
		t.Fatalf("exit %d, stderr %q; want 79 saying that the key was overwritten", code, stderr)
	}
	if resp, err := cl.Get(context.Background(), p.key); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("the overwritten key is still there (%v): %v", err, resp.Kvs)
	}
	if r := cli(t, ep, nil, "run", "--try", "r4", "--", "true"); r.code != 0 {
		t.Errorf("the next run --try: exit %d %s, want 0", r.code, r.stderr)
	}
}

// A run of several names one of whose keys is deleted while the command
// runs (an operator's etcdctl del) names that one as lost (or, when the
// loss is seen while the command runs, says that one of them was lost, or
// names both: the set's loss deletes its other keys), never the first
// name alone.
func TestCLIRunSetLosesOneName(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	cl := etcdtest.Client(t, ep)
	p := startPaused(t, ep, 0, nil, "run", "m1", "m2")
	if resp, err := cl.Delete(context.Background(), prefixOf(t)+"m2/", clientv3.WithPrefix()); err != nil || resp.Deleted != 1 {
		t.Fatalf("deleting m2's key: %v, %v", err, resp)
	}
	code, msg := p.finish(t)
	named := strings.Contains(msg, `lock "m2" lost while the command ran`) ||
		strings.Contains(msg, `one of locks "m1", "m2" lost while the command ran`) ||
		strings.Contains(msg, `locks "m1", "m2" lost while the command ran`)
	if code != 79 || !named || strings.Contains(msg, `lock "m1" lost`) {
		t.Errorf("exit %d, stderr %q; want 79 naming m2 (or one of m1, m2) as lost", code, msg)
	}
}

// The check after the command fits in one transaction for the largest
// set of names: etcd bounds each level of a transaction's operations.
func TestCLIRunLargestSetConfirmed(t *testing.T) {
	t.Parallel()
	args := []string{"run"}
	for i := range lock.MaxNames {
		args = append(args, fmt.Sprintf("n%d", i))
	}
	if r := cli(t, shared.Endpoints()[0], nil, append(args, "--", "true")...); r.code != 0 || r.stderr != "" {
		t.Errorf("run of %d names: exit %d, stderr %q; want 0 and nothing on stderr", lock.MaxNames, r.code, r.stderr)
	}
}
