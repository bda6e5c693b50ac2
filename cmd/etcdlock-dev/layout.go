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

// layoutFile, in a --data-dir of --members, records the cluster's token,
// peer URLs and client addresses: a member restarted on its data joins
// the peers its data names, so a restart must give every member the peer
// port it had; and the client ports the user was given stay the cluster's
// endpoints.
const layoutFile = "cluster"

// layout is how an n-member cluster's members find each other and serve.
type layout struct {
	token   string
	initial []string // m0=http://127.0.0.1:PORT, ...
	clients []string // 127.0.0.1:PORT, one per member
}

// peers is each member's peer URL.
func (l layout) peers() []string {
	var peers []string
	for _, m := range l.initial {
		_, peer, _ := strings.Cut(m, "=")
		peers = append(peers, peer)
	}
	return peers
}

// clusterLayout returns the layout of an n-member cluster whose data is
// under base ("" for a temporary directory): the one recorded there by an
// earlier run, or a new one on free loopback ports, recorded before any
// member starts. A record from before client addresses were recorded gets
// new ones, recorded too. It refuses a base that holds a cluster of
// another size, a single member's data, or members' data without a
// record.
func clusterLayout(base string, n int) (layout, error) {
	if base != "" {
		b, err := os.ReadFile(filepath.Join(base, layoutFile))
		switch {
		case err == nil:
			return recordedLayout(base, string(b), n)
		case !errors.Is(err, fs.ErrNotExist):
			return layout{}, fmt.Errorf("--data-dir: %w", err)
		}
		if err := notMembersData(base); err != nil {
			return layout{}, err
		}
	}
	// Ports free now, below the ephemeral range; a member that loses its
	// port to someone else fails to start and the whole cluster is
	// reported failed.
	addrs, err := embedded.FreeLoopbackAddrs("127.0.0.1", 2*n)
	if err != nil {
		return layout{}, err
	}
	l := layout{clients: addrs[n:]}
	for i, peer := range addrs[:n] {
		l.initial = append(l.initial, fmt.Sprintf("m%d=http://%s", i, peer))
	}
	tok := make([]byte, 8)
	_, _ = rand.Read(tok)
	l.token = "etcdlock-dev-" + hex.EncodeToString(tok)
	if base != "" {
		if err := writeLayout(base, l); err != nil {
			return layout{}, err
		}
	}
	return l, nil
}

// recordedLayout is the layout recorded in base (b, its record's
// content), for a cluster of n members.
func recordedLayout(base, b string, n int) (layout, error) {
	l, err := parseLayout(base, b)
	if err != nil {
		return layout{}, err
	}
	if len(l.initial) != n {
		return layout{}, holdsCluster(base, len(l.initial))
	}
	if l.clients == nil {
		if l.clients, err = embedded.FreeLoopbackAddrs("127.0.0.1", n, l.peers()...); err != nil {
			return layout{}, err
		}
		if err := writeLayout(base, l); err != nil {
			return layout{}, err
		}
	}
	return l, nil
}

// holdsCluster is the refusal of another use of dir, which holds an
// n-member cluster.
func holdsCluster(dir string, n int) error {
	return fmt.Errorf("--data-dir %s holds a %d-member cluster: start it with --members %d, or use another directory", dir, n, n)
}

// parseLayout parses the record b of base's cluster as writeLayout wrote
// it: its token, its initial cluster (m0=http://127.0.0.1:PORT,m1=...),
// and its client addresses (127.0.0.1:PORT,...), a line each; a record
// without the last line, from before it was written, has no clients.
func parseLayout(base, b string) (layout, error) {
	bad := fmt.Errorf("--data-dir %s: %s is not a cluster record of etcdlock dev (a token line, then m0=http://127.0.0.1:PORT,m1=..., then 127.0.0.1:PORT,... for the clients): restore it, or use another directory", base, filepath.Join(base, layoutFile))
	lines := strings.Split(strings.TrimSpace(strings.ReplaceAll(b, "\r\n", "\n")), "\n")
	if len(lines) < 2 || len(lines) > 3 || strings.TrimSpace(lines[0]) == "" {
		return layout{}, bad
	}
	l := layout{token: strings.TrimSpace(lines[0]), initial: strings.Split(strings.TrimSpace(lines[1]), ",")}
	if len(l.initial) < 2 {
		return layout{}, bad
	}
	ports := map[string]bool{}
	// port checks a loopback address's port: in range, and not one that
	// the record has already given.
	port := func(u *url.URL) bool {
		p, err := strconv.Atoi(u.Port())
		if err != nil || p < 1 || p > 65535 || ports[u.Port()] || u.Hostname() != "127.0.0.1" {
			return false
		}
		ports[u.Port()] = true
		return true
	}
	for i, m := range l.initial {
		name, peer, _ := strings.Cut(m, "=")
		u, err := url.Parse(peer)
		if name != fmt.Sprintf("m%d", i) || err != nil || u.Scheme != "http" || u.Path != "" || !port(u) {
			return layout{}, bad
		}
	}
	if len(lines) == 3 {
		l.clients = strings.Split(strings.TrimSpace(lines[2]), ",")
		if len(l.clients) != len(l.initial) {
			return layout{}, bad
		}
		for _, c := range l.clients {
			if !port(&url.URL{Host: c}) {
				return layout{}, bad
			}
		}
	}
	return l, nil
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

// writeLayout records l in base, an existing directory, whole or not at
// all.
func writeLayout(base string, l layout) error {
	tmp := filepath.Join(base, layoutFile+".new")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("--data-dir: %w", err)
	}
	_, err = f.WriteString(l.token + "\n" + strings.Join(l.initial, ",") + "\n" + strings.Join(l.clients, ",") + "\n")
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
	l, err := parseLayout(dir, string(b))
	if err != nil {
		return err
	}
	return holdsCluster(dir, len(l.initial))
}
