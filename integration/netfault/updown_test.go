package netfault

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// memberNames and clientNames are the nodes of every harness network:
// three members, two clients running etcdlock run, one running the probe.
var (
	memberNames = []string{"m0", "m1", "m2"}
	clientNames = []string{"c0", "c1", "p0"}
)

// leaderOf asks the probe, from node nd, which member leads; "" when no
// member says so within bound (every member must answer).
func leaderOf(ctx context.Context, bins *binaries, nd *node, c *cluster, bound time.Duration) string {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	for ctx.Err() == nil {
		out, err := exec.CommandContext(ctx, "ip", "netns", "exec", nd.ns, bins.probe, "leader", c.endpoints()).Output()
		if err == nil {
			ep := strings.TrimSpace(string(out))
			for i, cu := range c.clients {
				if cu == ep {
					return c.nodes[i].name
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	return ""
}

// TestNetworkUpDown makes the network and the cluster, finds the leader
// from a client's namespace, and removes it all: no namespace is left.
func TestNetworkUpDown(t *testing.T) {
	enabled(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	h := newHarness(t, ctx)
	n, c, bins := h.net, h.cluster, h.bins
	if l := leaderOf(ctx, bins, n.node("p0"), c, 30*time.Second); l == "" {
		t.Fatal("no leader")
	}
	// A cut client sees no leader; healed, it does.
	for _, m := range memberNames {
		if err := n.cut("p0", m); err != nil {
			t.Fatal(err)
		}
	}
	if l := leaderOf(ctx, bins, n.node("p0"), c, 3*time.Second); l != "" {
		t.Fatalf("a client cut off from every member found leader %s", l)
	}
	if err := n.heal(); err != nil {
		t.Fatal(err)
	}
	if l := leaderOf(ctx, bins, n.node("p0"), c, 30*time.Second); l == "" {
		t.Fatal("no leader after healing")
	}
	c.close()
	n.close()
	if left := n.namespaces(); len(left) > 0 {
		t.Fatalf("namespaces left: %v", left)
	}
}
