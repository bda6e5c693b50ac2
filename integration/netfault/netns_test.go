package netfault

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Every namespace the harness makes is named nsPrefix + the test process's
// pid + "-" + a node's name, so that a run can remove what an earlier,
// killed run left behind (its pid is gone) without touching another live
// run's namespaces.
const nsPrefix = "nfault-"

// subnet is where every address of the harness lies: 198.18.0.0/15 is
// reserved for benchmarking networks and never routed beyond this machine;
// the addresses exist only inside the harness's namespaces.
const subnet = "198.18.0"

// network is one harness network: a namespace per node, each with one
// veth (eth0) whose other end is a port of a bridge in a hub namespace of
// its own. The host's namespace gets no link, address or rule.
type network struct {
	id    string // namespace name prefix: nsPrefix + pid
	hub   string
	nodes []*node
	byNm  map[string]*node
}

// node is one host of the network: a member or a client.
type node struct {
	name string
	ns   string
	ip   string
	// The node's firewall: the peers it drops packets to and from.
	dropTo, dropFrom map[string]bool
}

// run runs a command and returns its error with its output.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// runIn runs a command with its standard input.
func runIn(stdin string, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s\n%s", name, strings.Join(args, " "), err, bytes.TrimSpace(out), stdin)
	}
	return nil
}

// usable says why this machine cannot run the harness, or nil: it needs
// root (network namespaces), ip, nft and ethtool.
func usable() error {
	if os.Geteuid() != 0 {
		return errors.New("the network fault harness needs root, to make network namespaces (run make chaos-net as root)")
	}
	for _, tool := range []string{"ip", "nft", "ethtool"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("the network fault harness needs %s (Debian: apt-get install iproute2 nftables ethtool): %v", tool, err)
		}
	}
	probe := fmt.Sprintf("%s%d-probe", nsPrefix, os.Getpid())
	if err := run("ip", "netns", "add", probe); err != nil {
		return fmt.Errorf("network namespaces are not allowed here: %v", err)
	}
	defer run("ip", "netns", "del", probe)
	if err := run("ip", "netns", "exec", probe, "nft", "add", "table", "inet", "probe"); err != nil {
		return fmt.Errorf("nftables does not work in a network namespace here: %v", err)
	}
	return nil
}

// sweep removes the namespaces of earlier harness runs whose process is
// gone, killing whatever still runs in them.
func sweep() {
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), nsPrefix)
		if !ok {
			continue
		}
		pidStr, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat(filepath.Join("/proc", pidStr)); err == nil {
			continue // a live run's
		}
		killAllIn(e.Name())
		_ = run("ip", "netns", "del", e.Name())
	}
}

// killAllIn kills every process in namespace ns.
func killAllIn(ns string) {
	out, _ := exec.Command("ip", "netns", "pids", ns).Output()
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil {
			_ = syscall.Kill(pid, syscall.SIGCONT)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// newNetwork makes the namespaces, the bridge and one veth per node, with
// addresses subnet.10 onwards in the nodes' order, and an empty firewall
// table in each node. close removes them all, also when t fails.
func newNetwork(t *testing.T, names ...string) *network {
	t.Helper()
	n := &network{id: fmt.Sprintf("%s%d", nsPrefix, os.Getpid()), byNm: map[string]*node{}}
	n.hub = n.id + "-hub"
	t.Cleanup(n.close)
	steps := [][]string{
		{"netns", "add", n.hub},
		{"-n", n.hub, "link", "set", "lo", "up"},
		{"-n", n.hub, "link", "add", "br0", "type", "bridge"},
		{"-n", n.hub, "link", "set", "br0", "up"},
	}
	for i, name := range names {
		nd := &node{name: name, ns: n.id + "-" + name, ip: fmt.Sprintf("%s.%d", subnet, 10+i), dropTo: map[string]bool{}, dropFrom: map[string]bool{}}
		n.nodes = append(n.nodes, nd)
		n.byNm[name] = nd
		steps = append(steps,
			[]string{"netns", "add", nd.ns},
			[]string{"-n", nd.ns, "link", "set", "lo", "up"},
			[]string{"-n", n.hub, "link", "add", name, "type", "veth", "peer", "name", "eth0", "netns", nd.ns},
			[]string{"-n", n.hub, "link", "set", name, "master", "br0", "up"},
			[]string{"-n", nd.ns, "addr", "add", nd.ip + "/24", "dev", "eth0"},
			[]string{"-n", nd.ns, "link", "set", "eth0", "up"},
		)
	}
	for _, s := range steps {
		if err := run("ip", s...); err != nil {
			t.Fatal(err)
		}
	}
	for _, nd := range n.nodes {
		if err := n.applyFirewall(nd); err != nil {
			t.Fatal(err)
		}
		// Offloads off on both ends of every link, so that the relay
		// can carry any node's frames as they are.
		if err := offloadsOff(nd.ns, "eth0"); err != nil {
			t.Fatal(err)
		}
		if err := offloadsOff(n.hub, nd.name); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// node returns the node called name.
func (n *network) node(name string) *node {
	nd, ok := n.byNm[name]
	if !ok {
		panic("netfault: no node " + name)
	}
	return nd
}

// close kills what runs in the namespaces and removes them (the veths
// and the bridge go with them).
func (n *network) close() {
	for _, nd := range n.nodes {
		killAllIn(nd.ns)
	}
	for _, nd := range n.nodes {
		_ = run("ip", "netns", "del", nd.ns)
	}
	_ = run("ip", "netns", "del", n.hub)
}

// namespaces lists the harness's namespaces that exist now.
func (n *network) namespaces() []string {
	entries, _ := os.ReadDir("/run/netns")
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), n.id+"-") {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// applyFirewall replaces nd's rules by its drop sets: packets to a peer in
// dropTo are dropped on the way out, packets from one in dropFrom on the
// way in — silently, as a cut cable or a partitioned switch does.
func (n *network) applyFirewall(nd *node) error {
	var b strings.Builder
	b.WriteString("table inet nfault {}\ndelete table inet nfault\ntable inet nfault {\n")
	b.WriteString(" chain out {\n  type filter hook output priority 0; policy accept;\n")
	for _, p := range sortedKeys(nd.dropTo) {
		fmt.Fprintf(&b, "  ip daddr %s drop\n", n.node(p).ip)
	}
	b.WriteString(" }\n chain in {\n  type filter hook input priority 0; policy accept;\n")
	for _, p := range sortedKeys(nd.dropFrom) {
		fmt.Fprintf(&b, "  ip saddr %s drop\n", n.node(p).ip)
	}
	b.WriteString(" }\n}\n")
	return runIn(b.String(), "ip", "netns", "exec", nd.ns, "nft", "-f", "-")
}

// cut drops every packet from a to b (one direction: b still reaches a
// unless cut the other way too).
func (n *network) cut(a, b string) error {
	from, to := n.node(a), n.node(b)
	from.dropTo[b] = true
	to.dropFrom[a] = true
	if err := n.applyFirewall(from); err != nil {
		return err
	}
	return n.applyFirewall(to)
}

// heal removes every drop rule.
func (n *network) heal() error {
	for _, nd := range n.nodes {
		if len(nd.dropTo) == 0 && len(nd.dropFrom) == 0 {
			continue
		}
		nd.dropTo, nd.dropFrom = map[string]bool{}, map[string]bool{}
		if err := n.applyFirewall(nd); err != nil {
			return err
		}
	}
	return nil
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
