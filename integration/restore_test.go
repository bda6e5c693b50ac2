package integration

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/snapshot"
	utlsnapshot "go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/embedded"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
)

// Restoring an etcd snapshot with etcdutl's --bump-revision and
// --mark-compacted keeps tokens increasing; restoring without the bump
// reissues old tokens — the negative control, which the token check must
// flag.
func TestSnapshotRestoreKeepsTokensIncreasing(t *testing.T) {
	t.Parallel()
	for _, bump := range []uint64{1_000_000, 0} {
		t.Run(map[bool]string{true: "with-bump", false: "without-bump (negative control)"}[bump > 0], func(t *testing.T) {
			t.Parallel()
			regressions := restoreAndAcquire(t, bump)
			if bump > 0 && regressions != 0 {
				t.Errorf("%d token regressions after a restore with --bump-revision", regressions)
			}
			if bump == 0 && regressions == 0 {
				t.Errorf("negative control: a restore without --bump-revision reissued no old token; the check is blind")
			}
		})
	}
}

// restoreAndAcquire takes owners through a snapshot, a restore, and more
// acquisitions, and returns the number of token regressions seen.
func restoreAndAcquire(t *testing.T, bump uint64) int {
	ctx := testCtx(t, 2*time.Minute)
	dir := t.TempDir()
	c := etcdtest.Cluster(t, embedded.WithDir(dir))
	m := c.Member(0)
	var tokens []fencing.Token
	cycle := func(cli *clientv3.Client, owner string, n int) {
		s := session(t, cli, owner)
		for range n {
			l := acquire(t, ctx, s, "job")
			tokens = append(tokens, l.Token())
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	cli := etcdtest.Client(t, c.Endpoints()...)
	cycle(cli, "before-snapshot", 3)
	snap := filepath.Join(t.TempDir(), "snap.db")
	if _, err := snapshot.SaveWithVersion(ctx, zap.NewNop(), clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()}, snap); err != nil {
		t.Fatal(err)
	}
	cycle(cli, "after-snapshot", 3)

	m.Stop()
	if err := os.RemoveAll(m.Dir()); err != nil {
		t.Fatal(err)
	}
	err := utlsnapshot.NewV3(zap.NewNop()).Restore(utlsnapshot.RestoreConfig{
		SnapshotPath: snap, Name: m.Name(), OutputDataDir: m.Dir(),
		PeerURLs: []string{m.PeerURL()}, InitialCluster: m.Name() + "=" + m.PeerURL(), InitialClusterToken: "restored",
		RevisionBump: bump, MarkCompacted: bump > 0,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	cycle(etcdtest.Client(t, c.Endpoints()...), "after-restore", 2)

	regressions := 0
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			regressions++
		}
	}
	t.Logf("tokens across snapshot and restore (bump %d): %v; regressions %d", bump, tokens, regressions)
	return regressions
}
