//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// server is one etcd release that make compat tests.
type server struct {
	version string // major.minor, as the members report it
	from    string // where its binary comes from, for the report
	// obtain returns the program that runs one member and the arguments
	// before the member's own, building or unpacking it on the first run
	// only.
	obtain func(ctx context.Context) (path string, args []string, err error)
	// args are a member's arguments.
	args func(m memberSpec) []string
}

// servers are the releases, oldest first: the table the README's support
// matrix follows.
var servers = []server{
	{version: "3.4", from: "Debian's etcd-server package", obtain: debianEtcd, args: etcdArgs},
	{version: "3.5", from: "go.etcd.io/etcd/server/v3 in hack/etcdserver/v3.5", obtain: goTool("hack/etcdserver/v3.5"), args: etcdArgs},
	{version: "3.6", from: "go.etcd.io/etcd/server/v3 in hack/etcdserver/v3.6", obtain: goTool("hack/etcdserver/v3.6"), args: etcdArgs},
	{version: "3.7", from: "this module's go.etcd.io/etcd/server/v3, embedded (compat member)", obtain: self, args: memberArgs},
}

// memberSpec is one member of a cluster to start.
type memberSpec struct {
	name, dir      string // dir: the member's data directory
	client, peer   string // URLs
	initialCluster string // name=peerURL,...
	token          string
}

// etcdArgs are the flags of etcd's own server (3.4 to 3.7 alike) for m.
// The raft timing is etcd's default (100 ms heartbeat, 1 s election
// timeout), as in production and in the single-member clusters of the
// tests' own set-up: etcd's smallest lease TTL is then 2 s.
func etcdArgs(m memberSpec) []string {
	return []string{
		"--name", m.name, "--data-dir", m.dir,
		"--listen-client-urls", m.client, "--advertise-client-urls", m.client,
		"--listen-peer-urls", m.peer, "--initial-advertise-peer-urls", m.peer,
		"--initial-cluster", m.initialCluster, "--initial-cluster-token", m.token,
		"--initial-cluster-state", "new",
		"--logger", "zap", "--log-level", "warn",
	}
}

// memberArgs are the arguments of this program's member mode for m.
func memberArgs(m memberSpec) []string {
	return []string{"--name", m.name, "--data-dir", m.dir, "--client", m.client,
		"--initial-cluster", m.initialCluster, "--token", m.token}
}

// self is the 3.7 member: this program, whose member mode runs this
// module's etcd embedded (pkg/embedded).
func self(context.Context) (string, []string, error) {
	exe, err := os.Executable()
	return exe, []string{"member"}, err
}

// goTool builds the etcd server of the module in dir, where it is a tool
// (go.mod's tool directive): `go tool -n` builds it into the go command's
// build cache, or finds it there, and prints its path.
func goTool(dir string) func(ctx context.Context) (string, []string, error) {
	return func(ctx context.Context) (string, []string, error) {
		cmd := exec.CommandContext(ctx, "go", "tool", "-n", "go.etcd.io/etcd/server/v3")
		cmd.Dir = dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", nil, fmt.Errorf("go tool -n in %s: %v\n%s", dir, err, stderr.Bytes())
		}
		path := strings.TrimSpace(string(out))
		if _, err := os.Stat(path); err != nil {
			return "", nil, fmt.Errorf("go tool -n in %s printed %q: %w", dir, path, err)
		}
		return path, nil, nil
	}
}

// debianEtcd unpacks the etcd of Debian's etcd-server package, its
// candidate version, into the user's cache directory (once per version),
// without installing it: an installed package would start a system
// service. It runs apt-get update first when apt knows no candidate and
// this runs as root.
func debianEtcd(ctx context.Context) (string, []string, error) {
	version, err := debianCandidate(ctx, "etcd-server")
	if err != nil && os.Geteuid() == 0 {
		if out, uerr := exec.CommandContext(ctx, "apt-get", "update", "-qq").CombinedOutput(); uerr != nil {
			return "", nil, fmt.Errorf("apt-get update: %v\n%s", uerr, out)
		}
		version, err = debianCandidate(ctx, "etcd-server")
	}
	if err != nil {
		return "", nil, err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", nil, err
	}
	dir := filepath.Join(cache, "etcdlock", "etcd-server_"+version)
	path := filepath.Join(dir, "usr", "bin", "etcd")
	if _, err := os.Stat(path); err == nil {
		return path, nil, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".etcd-server-")
	if err != nil {
		return "", nil, err
	}
	defer os.RemoveAll(tmp)
	// apt-get downloads as the _apt user where it can; the directory
	// must let it write.
	if err := os.Chmod(tmp, 0o777); err != nil {
		return "", nil, err
	}
	get := exec.CommandContext(ctx, "apt-get", "download", "-q", "etcd-server="+version)
	get.Dir = tmp
	if out, err := get.CombinedOutput(); err != nil {
		return "", nil, fmt.Errorf("apt-get download etcd-server=%s: %v\n%s", version, err, out)
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, "etcd-server_*.deb"))
	if len(debs) != 1 {
		return "", nil, fmt.Errorf("apt-get download etcd-server=%s left %d packages", version, len(debs))
	}
	root := filepath.Join(tmp, "root")
	if out, err := exec.CommandContext(ctx, "dpkg-deb", "-x", debs[0], root).CombinedOutput(); err != nil {
		return "", nil, fmt.Errorf("dpkg-deb -x: %v\n%s", err, out)
	}
	if err := os.Rename(root, dir); err != nil {
		return "", nil, err
	}
	return path, nil, nil
}

// debianCandidate returns the version apt would install of pkg.
func debianCandidate(ctx context.Context, pkg string) (string, error) {
	out, err := exec.CommandContext(ctx, "apt-cache", "policy", pkg).Output()
	if err != nil {
		return "", fmt.Errorf("apt-cache policy %s: %w (Debian's apt is needed for etcd 3.4)", pkg, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Candidate:"); ok {
			if v = strings.TrimSpace(v); v != "" && v != "(none)" {
				return v, nil
			}
		}
	}
	return "", errors.New("apt knows no candidate of " + pkg)
}
