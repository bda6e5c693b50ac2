package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/etcdlock/etcdlock/pkg/embedded"
)

// layoutFile, in a --data-dir of --members, records the cluster's peer
// URLs and token: a member restarted on its data joins the peers its data
// names, so a restart must give every member the peer port it had.
const layoutFile = "cluster"

// clusterLayout returns the initial cluster (name=peerURL,...) and token
// of an n-member cluster whose data is under base ("" for a temporary
// directory): those recorded there by an earlier run, or new ones on free
// loopback ports, recorded before any member starts. It refuses a base
// that holds a cluster of another size, a single member's data, or
// members' data without a record.
func clusterLayout(base string, n int) (initial []string, token string, err error) {
	if base != "" {
		b, err := os.ReadFile(filepath.Join(base, layoutFile))
		switch {
		case err == nil:
			return recordedLayout(base, string(b), n)
		case !errors.Is(err, fs.ErrNotExist):
			return nil, "", fmt.Errorf("--data-dir: %w", err)
		}
		if err := notMembersData(base); err != nil {
			return nil, "", err
		}
	}
	// Ports free now, below the ephemeral range; a member that loses its
	// port to someone else fails to start and the whole cluster is
	// reported failed.
	peers, err := embedded.FreeLoopbackAddrs("127.0.0.1", n)
	if err != nil {
		return nil, "", err
	}
	for i, peer := range peers {
		initial = append(initial, fmt.Sprintf("m%d=http://%s", i, peer))
	}
	tok := make([]byte, 8)
	_, _ = rand.Read(tok)
	token = "etcdlock-dev-" + hex.EncodeToString(tok)
	if base != "" {
		if err := writeLayout(base, token, initial); err != nil {
			return nil, "", err
		}
	}
	return initial, token, nil
}

// recordedLayout is the layout recorded in base (b, its record's
// content), for a cluster of n members.
func recordedLayout(base, b string, n int) ([]string, string, error) {
	initial, token, err := parseLayout(base, b)
	if err != nil {
		return nil, "", err
	}
	if len(initial) != n {
		return nil, "", holdsCluster(base, len(initial))
	}
	return initial, token, nil
}

// holdsCluster is the refusal of another use of dir, which holds an
// n-member cluster.
func holdsCluster(dir string, n int) error {
	return fmt.Errorf("--data-dir %s holds a %d-member cluster: start it with --members %d, or use another directory", dir, n, n)
}

// parseLayout parses the record b of base's cluster: its token, then its
// initial cluster (m0=http://127.0.0.1:PORT,m1=...), a line each, as
// writeLayout wrote them.
func parseLayout(base, b string) ([]string, string, error) {
	bad := fmt.Errorf("--data-dir %s: %s is not a cluster record of etcdlock dev (a token line, then m0=http://127.0.0.1:PORT,m1=...): restore it, or use another directory", base, filepath.Join(base, layoutFile))
	lines := strings.Split(strings.TrimSpace(strings.ReplaceAll(b, "\r\n", "\n")), "\n")
	if len(lines) != 2 || strings.TrimSpace(lines[0]) == "" {
		return nil, "", bad
	}
	initial := strings.Split(strings.TrimSpace(lines[1]), ",")
	if len(initial) < 2 {
		return nil, "", bad
	}
	ports := map[string]bool{}
	for i, m := range initial {
		name, peer, _ := strings.Cut(m, "=")
		u, err := url.Parse(peer)
		if name != fmt.Sprintf("m%d", i) || err != nil || u.Scheme != "http" || u.Hostname() != "127.0.0.1" || u.Path != "" {
			return nil, "", bad
		}
		if port, err := strconv.Atoi(u.Port()); err != nil || port < 1 || port > 65535 || ports[u.Port()] {
			return nil, "", bad // no port, out of range, or a port twice
		}
		ports[u.Port()] = true
	}
	return initial, strings.TrimSpace(lines[0]), nil
}

// notMembersData fails if base holds a single member's data (in m0, as
// the members' first), or members' data without the record of their
// ports.
func notMembersData(base string) error {
	if _, err := os.Stat(filepath.Join(base, "m1")); err == nil {
		return fmt.Errorf("--data-dir %s holds members' data but no record of their ports (%s): use another directory", base, layoutFile)
	}
	if _, err := os.Stat(filepath.Join(base, "m0")); err == nil {
		return fmt.Errorf("--data-dir %s holds a single member's data: start it without --members, or use another directory", base)
	}
	return nil
}

// writeLayout records token and initial in base, an existing directory,
// whole or not at all.
func writeLayout(base, token string, initial []string) error {
	tmp := filepath.Join(base, layoutFile+".new")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("--data-dir: %w", err)
	}
	_, err = f.WriteString(token + "\n" + strings.Join(initial, ",") + "\n")
	if err == nil {
		err = f.Sync() // on disk before the rename makes it the record
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(base, layoutFile))
	}
	if err != nil {
		return fmt.Errorf("--data-dir: %w", err)
	}
	return nil
}

// notClusterData fails if dir, a single member's --data-dir, holds a
// cluster that --members started, or a record that is not one.
func notClusterData(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, layoutFile))
	if err != nil {
		return nil
	}
	initial, _, err := parseLayout(dir, string(b))
	if err != nil {
		return err
	}
	return holdsCluster(dir, len(initial))
}
