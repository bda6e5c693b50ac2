package netfault

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// linkShape is what the relay does to one node's frames, both ways.
type linkShape struct {
	delay, jitter time.Duration
	loss, dup     float64
}

// offloadsOff turns off a link's checksum and segmentation offloads, so
// that the relay reads frames of at most the MTU, with their checksums.
func offloadsOff(ns, link string) error {
	return run("ip", "netns", "exec", ns, "ethtool", "-K", link, "tx", "off", "tso", "off", "gso", "off", "gro", "off")
}

// shapeLink puts the relay on node name's link: its hub-side veth leaves
// the bridge, and the relay carries its frames to a new veth pair whose
// other end is on the bridge. heal stops the relay and puts the link
// back as it was.
func (h *harness) shapeLink(name string, sh linkShape, seed uint64) (heal func() error, err error) {
	hub := h.net.hub
	relayEnd, bridgeEnd := name+"r", name+"b"
	steps := [][]string{
		{"-n", hub, "link", "set", name, "nomaster"},
		{"-n", hub, "link", "set", name, "promisc", "on"},
		{"-n", hub, "link", "add", relayEnd, "type", "veth", "peer", "name", bridgeEnd},
		{"-n", hub, "link", "set", relayEnd, "promisc", "on", "up"},
		{"-n", hub, "link", "set", bridgeEnd, "master", "br0", "up"},
	}
	unlink := func() error {
		var first error
		for _, s := range [][]string{{"-n", hub, "link", "del", relayEnd}, {"-n", hub, "link", "set", name, "master", "br0"}} {
			if err := run("ip", s...); err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	for _, s := range steps {
		if err := run("ip", s...); err != nil {
			_ = unlink()
			return nil, err
		}
	}
	for _, l := range []string{relayEnd, bridgeEnd} {
		if err := offloadsOff(hub, l); err != nil {
			_ = unlink()
			return nil, err
		}
	}
	r, w, err := os.Pipe()
	if err != nil {
		_ = unlink()
		return nil, err
	}
	p, err := startIn(&node{ns: hub}, w, os.Stderr, h.bins.relay, name, relayEnd, sh.delay.String(), sh.jitter.String(),
		fmt.Sprint(sh.loss), fmt.Sprint(sh.dup), fmt.Sprint(seed))
	w.Close()
	if err != nil {
		r.Close()
		_ = unlink()
		return nil, err
	}
	line, _ := bufio.NewReader(r).ReadString('\n')
	r.Close()
	stop := func() error {
		p.signal(syscall.SIGTERM)
		<-p.done
		return unlink()
	}
	if strings.TrimSpace(line) != "ready" {
		_ = stop()
		return nil, fmt.Errorf("relay on %s did not start: %v", name, p.err)
	}
	return stop, nil
}

// TestRelay: a relay that drops every frame of a client's link cuts the
// client off; one that drops none carries its traffic; healed, the link
// is back on the bridge.
func TestRelay(t *testing.T) {
	enabled(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	h := newHarness(t, ctx)
	p0 := h.net.node("p0")
	for _, tt := range []struct {
		sh      linkShape
		reaches bool
	}{
		{linkShape{}, true},
		{linkShape{loss: 1}, false},
		{linkShape{delay: 20 * time.Millisecond, jitter: 10 * time.Millisecond, loss: 0.05, dup: 0.05}, true},
	} {
		heal, err := h.shapeLink("p0", tt.sh, 1)
		if err != nil {
			t.Fatal(err)
		}
		bound := 30 * time.Second
		if !tt.reaches {
			bound = 3 * time.Second
		}
		l := leaderOf(ctx, h.bins, p0, h.cluster, bound)
		if err := heal(); err != nil {
			t.Fatal(err)
		}
		if (l != "") != tt.reaches {
			t.Errorf("%+v: leader %q seen; want reached=%v", tt.sh, l, tt.reaches)
		}
	}
	if l := leaderOf(ctx, h.bins, p0, h.cluster, 30*time.Second); l == "" {
		t.Fatal("no leader once the link is healed")
	}
}
