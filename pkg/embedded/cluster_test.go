package embedded

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"

	"github.com/etcdlock/etcdlock/pkg/internal/leakcheck"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		// A stopped member's peer connections end within etcd's peer
		// read timeout, after goleak's own retries.
		if err := leakcheck.Find(leakcheck.Patience); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func newClient(t *testing.T, eps []string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zaptest.NewLogger(t).Named("client")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func TestSingleMemberServesAndRestartKeepsData(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Start(ctx, WithClientAddr("127.0.0.1:0")) // port 0: a free one
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if ep := c.Endpoints()[0]; strings.HasSuffix(ep, ":0") || !strings.HasPrefix(ep, "http://127.0.0.1:") {
		t.Fatalf("endpoint %q, want the chosen port on 127.0.0.1", ep)
	}
	cli := newClient(t, c.Endpoints())
	put, err := cli.Put(ctx, "k", "v")
	if err != nil {
		t.Fatal(err)
	}

	m := c.Member(0)
	m.Stop()
	if m.Running() {
		t.Fatal("member still running after Stop")
	}
	if err := m.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	get, err := cli.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if len(get.Kvs) != 1 || string(get.Kvs[0].Value) != "v" || get.Kvs[0].CreateRevision != put.Header.Revision {
		t.Fatalf("after restart got %v, want k=v created at %d", get.Kvs, put.Header.Revision)
	}
}

func TestThreeMembersSurviveLeaderCrash(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Start(ctx, WithMembers(3), WithRaftTiming(50*time.Millisecond, 500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := len(c.Endpoints()); got != 3 {
		t.Fatalf("endpoints = %d, want 3", got)
	}
	old, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cli := newClient(t, c.Endpoints())
	if _, err := cli.Put(ctx, "before", "1"); err != nil {
		t.Fatal(err)
	}
	old.HardStop()
	now, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if now == old {
		t.Fatalf("leader %s did not change after hard stop", now)
	}
	if _, err := cli.Put(ctx, "after", "2"); err != nil {
		t.Fatal(err)
	}
	if err := old.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	one := newClient(t, []string{old.Endpoint()})
	// A restarted follower serves linearizable reads once it caught up.
	get, err := one.Get(ctx, "after")
	if err != nil || len(get.Kvs) != 1 {
		t.Fatalf("restarted member read: %v %v", get, err)
	}
}

func TestOptionsRejectBadInput(t *testing.T) {
	ctx := context.Background()
	for name, opt := range map[string]Option{
		"zero members": WithMembers(0),
		"empty dir":    WithDir(""),
		"nil logger":   WithLogger(nil),
		"bad timing":   WithRaftTiming(100*time.Millisecond, 100*time.Millisecond),
		"non-loopback": WithClientAddr("0.0.0.0:2379"),
		"no port":      WithClientAddr("127.0.0.1"),
		"nil config":   WithConfig(nil),
	} {
		t.Run(name, func(t *testing.T) {
			if c, err := Start(ctx, opt); err == nil {
				c.Close()
				t.Fatal("Start accepted bad option")
			}
		})
	}
	if c, err := Start(ctx, WithMembers(2), WithClientAddr("127.0.0.1:1")); err == nil {
		c.Close()
		t.Fatal("Start accepted a fixed client address with two members")
	}
}

// FreeLoopbackAddr chooses ports below the ephemeral range, which no
// outgoing connection takes, free on every interface, and only on a
// loopback IP.
func TestFreeLoopbackAddrIsBelowTheEphemeralRange(t *testing.T) {
	first := ephemeralStart()
	for range 20 {
		addr, err := FreeLoopbackAddr("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.Atoi(port)
		if host != "127.0.0.1" || err != nil || n < minFreePort || n >= first {
			t.Fatalf("FreeLoopbackAddr = %q, want 127.0.0.1 and a port in [%d, %d)", addr, minFreePort, first)
		}
		l, err := net.Listen("tcp", ":"+port)
		if err != nil {
			t.Fatalf("port %s not free on every interface: %v", port, err)
		}
		l.Close()
	}
	// A port held on 127.0.0.1 alone fails the check on every interface,
	// which the choice relies on.
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if l, err := net.Listen("tcp", ":"+strconv.Itoa(held.Addr().(*net.TCPAddr).Port)); err == nil {
		l.Close()
		t.Fatal("a port held on 127.0.0.1 passed the check on every interface")
	}
	for _, host := range []string{"0.0.0.0", "localhost", "10.1.2.3", "", "::"} {
		if addr, err := FreeLoopbackAddr(host); err == nil {
			t.Errorf("FreeLoopbackAddr(%q) = %q, want an error: not a loopback IP", host, addr)
		}
	}
}

// FreeLoopbackAddrs never repeats a port, nor takes one of taken's (URLs
// or host:port). 300 draws of FreeLoopbackAddr among about 22,000 ports
// repeat one more often than not.
func TestFreeLoopbackAddrsAreDistinct(t *testing.T) {
	first, err := FreeLoopbackAddrs("127.0.0.1", 150)
	if err != nil {
		t.Fatal(err)
	}
	taken := append([]string{"http://" + first[0]}, first[1:]...)
	second, err := FreeLoopbackAddrs("127.0.0.1", 150, taken...)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, addr := range append(first, second...) {
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		if prev, ok := seen[port]; ok {
			t.Fatalf("port %s chosen twice: %s and %s", port, prev, addr)
		}
		seen[port] = addr
	}
	if len(first) != 150 || len(second) != 150 {
		t.Fatalf("got %d and %d addresses, want 150 each", len(first), len(second))
	}
}
