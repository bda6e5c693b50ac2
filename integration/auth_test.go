package integration

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/pkg/embedded"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
)

// TLS with client certificates and RBAC: a user whose role covers the lock
// prefix can lock; a user without that role gets exit 77; a client without
// a certificate, or with a missing key file, gets 78; a wrong password 77.
func TestCLITLSAndAuth(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := newCA(t, dir)
	srvCert, srvKey := ca.issue(t, dir, "server", true)
	cliCert, cliKey := ca.issue(t, dir, "client", false)
	c := etcdtest.Cluster(t, embedded.WithClientTLS(transport.TLSInfo{
		CertFile: srvCert, KeyFile: srvKey, TrustedCAFile: ca.file, ClientCertAuth: true,
	}), embedded.WithConfig(func(cfg *embed.Config) {
		// bcrypt's least cost: at etcd's default each password check
		// takes about a second under the race detector on a busy
		// machine, and a CLI call with a wrong password ran out of time.
		cfg.BcryptCost = 4
	}))
	ep := c.Endpoints()[0]
	if !strings.HasPrefix(ep, "https://") {
		t.Fatalf("endpoint %s is not TLS", ep)
	}

	// Set up RBAC as root, then enable auth.
	tlsCfg, err := (transport.TLSInfo{CertFile: cliCert, KeyFile: cliKey, TrustedCAFile: ca.file}).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	root, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, TLS: tlsCfg, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	ctx := testCtx(t, time.Minute)
	pfx := prefixOf(t)
	for _, step := range []func() error{
		func() error { _, err := root.UserAdd(ctx, "root", "rootpw"); return err },
		func() error { _, err := root.RoleAdd(ctx, "root"); return err },
		func() error { _, err := root.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := root.RoleAdd(ctx, "locker"); return err },
		func() error {
			_, err := root.RoleGrantPermission(ctx, "locker", pfx, clientv3.GetPrefixRangeEnd(pfx), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := root.UserAdd(ctx, "alice", "alicepw"); return err },
		func() error { _, err := root.UserGrantRole(ctx, "alice", "locker"); return err },
		func() error { _, err := root.UserAdd(ctx, "bob", "bobpw"); return err },
		func() error { _, err := root.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}

	tlsFlags := []string{"--cacert", ca.file, "--cert", cliCert, "--key", cliKey}
	run := func(extra ...string) cliResult {
		return cli(t, ep, nil, append(append([]string{}, tlsFlags...), extra...)...)
	}
	if r := run("--user", "alice:alicepw", "run", "--try", "job", "--", "true"); r.code != 0 {
		t.Errorf("alice (role on the prefix): exit %d %q", r.code, r.stderr)
	}
	if r := run("--user", "bob", "--password", "bobpw", "run", "--try", "job", "--", "true"); r.code != 77 {
		t.Errorf("bob (no role): exit %d %q, want 77", r.code, r.stderr)
	}
	if r := run("--user", "alice:wrong", "status", "job"); r.code != 77 {
		t.Errorf("wrong password: exit %d %q, want 77", r.code, r.stderr)
	}
	r := cli(t, ep, nil, "--cacert", ca.file, "--cert", cliCert, "--key", filepath.Join(dir, "missing.key"), "--user", "alice:alicepw", "status", "job")
	if r.code != 78 {
		t.Errorf("missing key file: exit %d %q, want 78", r.code, r.stderr)
	}
	r = cli(t, ep, []string{"ETCDLOCK_CACERT=" + ca.file, "ETCDLOCK_CERT=" + cliCert, "ETCDLOCK_KEY_FILE=" + cliKey, "ETCDLOCK_USER=alice:alicepw"}, "status", "job")
	if r.code != 0 || !strings.Contains(r.stdout, "free") {
		t.Errorf("TLS and user from the environment: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
}
