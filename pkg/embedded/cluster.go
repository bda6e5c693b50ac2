package embedded

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Cluster is a set of embedded etcd members started together. Its methods are
// safe for concurrent use.
type Cluster struct {
	cfg     config
	tempDir string // removed by Close; empty when the caller chose the dir
	members []*Member
}

// Start starts the members and returns once every member has joined the
// cluster and a leader is elected, or ctx ends. On error nothing is left
// running.
func Start(ctx context.Context, opts ...Option) (*Cluster, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.memberOf != nil && cfg.members != 1 {
		return nil, fmt.Errorf("embedded: WithMemberOf starts one member, not %d", cfg.members)
	}
	if (cfg.clientAddr != "" || cfg.clientHost != "") && cfg.members != 1 {
		return nil, fmt.Errorf("embedded: WithClientAddr needs exactly one member, have %d", cfg.members)
	}
	c := &Cluster{cfg: cfg}
	base := cfg.dir
	if base == "" {
		d, err := os.MkdirTemp("", "etcdlock-embedded-")
		if err != nil {
			return nil, fmt.Errorf("embedded: %w", err)
		}
		base, c.tempDir = d, d
	}
	// A free port found by listening on :0 can be taken by someone else
	// before etcd binds it; retry with fresh ports in that rare case.
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = c.start(ctx, base); err == nil {
			return c, nil
		}
		c.stopAll()
		if !isAddrInUse(err) || cfg.clientAddr != "" {
			break
		}
	}
	if c.tempDir != "" {
		_ = os.RemoveAll(c.tempDir)
	}
	return nil, err
}

func (c *Cluster) start(ctx context.Context, base string) error {
	token, err := randomHex(8)
	if err != nil {
		return err
	}
	c.members = make([]*Member, c.cfg.members)
	// Distinct ports for every member's client and peer listeners.
	clients, err := FreeLoopbackAddrs(cmp.Or(c.cfg.clientHost, "127.0.0.1"), len(c.members))
	if err != nil {
		return err
	}
	peers, err := FreeLoopbackAddrs("127.0.0.1", len(c.members), append(clients, c.cfg.clientAddr)...)
	if err != nil {
		return err
	}
	var initial []string
	for i := range c.members {
		m := &Member{cluster: c, name: fmt.Sprintf("m%d", i), dir: filepath.Join(base, fmt.Sprintf("m%d", i))}
		if mo := c.cfg.memberOf; mo != nil {
			m.name, m.dir = mo.name, filepath.Join(base, mo.name)
		}
		m.clientURL, m.peerURL = c.cfg.clientAddr, ""
		if m.clientURL == "" {
			m.clientURL = clients[i]
		}
		if c.cfg.memberOf == nil {
			m.peerURL = "http://" + peers[i]
		}
		scheme := "http://"
		if c.cfg.clientTLS != nil {
			scheme = "https://"
		}
		m.clientURL = scheme + m.clientURL
		initial = append(initial, m.name+"="+m.peerURL)
		c.members[i] = m
	}
	for _, m := range c.members {
		m.initialCluster, m.clusterToken = strings.Join(initial, ","), "etcdlock-"+token
		if mo := c.cfg.memberOf; mo != nil {
			m.peerURL, m.initialCluster, m.clusterToken = mo.peerURL, mo.initialCluster, mo.token
		}
		if err := m.launch(); err != nil {
			return err
		}
	}
	for _, m := range c.members {
		if err := m.waitReady(ctx); err != nil {
			return err
		}
	}
	if c.cfg.memberOf != nil {
		// The leader may be in another process; a member is ready only
		// once the cluster has committed its attributes, so it has one.
		return nil
	}
	_, err = c.Leader(ctx)
	return err
}

// Members returns the cluster's members in a fixed order.
func (c *Cluster) Members() []*Member { return append([]*Member(nil), c.members...) }

// Member returns member i (0-based).
func (c *Cluster) Member(i int) *Member { return c.members[i] }

// Endpoints returns the client URLs of all members, running or not, in
// member order.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.members))
	for i, m := range c.members {
		eps[i] = m.clientURL
	}
	return eps
}

// Leader waits until one running member reports itself leader and returns
// it, or returns ctx's error.
func (c *Cluster) Leader(ctx context.Context) (*Member, error) {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		for _, m := range c.members {
			if m.IsLeader() {
				return m, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("embedded: waiting for a leader: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// Close stops every running member and, when Start chose a temporary
// directory, removes it. It is safe to call more than once.
func (c *Cluster) Close() error {
	c.stopAll()
	if c.tempDir != "" {
		return os.RemoveAll(c.tempDir)
	}
	return nil
}

func (c *Cluster) stopAll() {
	var wg sync.WaitGroup
	for _, m := range c.members {
		if m == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.Stop()
		}()
	}
	wg.Wait()
}

func (c *Cluster) logger() *zap.Logger { return c.cfg.logger }

func mustURL(s string) url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err) // only called with URLs this package built
	}
	return *u
}

// FreeLoopbackAddr returns host:port, host a loopback IP such as
// 127.0.0.1, with a port free at the moment on host (it listens there, on
// host only, and closes at once). The port
// lies below the kernel's range of ephemeral ports, where a port found by
// listening on port 0 lies: there, any outgoing connection of any process
// can take it before the caller binds it. Another process choosing the
// same port at the same moment can still take it; a caller that fails to
// bind it with "address already in use" should choose again.
func FreeLoopbackAddr(host string) (string, error) {
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return "", fmt.Errorf("embedded: %q is not a loopback IP", host)
	}
	first := ephemeralStart()
	var err error
	for range 100 {
		port := strconv.Itoa(minFreePort + mathrand.IntN(first-minFreePort))
		var l net.Listener
		if l, err = net.Listen("tcp", net.JoinHostPort(host, port)); err == nil {
			l.Close()
			return net.JoinHostPort(host, port), nil
		}
	}
	return "", fmt.Errorf("embedded: no free port below %d: %w", first, err)
}

// FreeLoopbackAddrs returns n addresses as FreeLoopbackAddr does, whose
// ports differ from one another and from those of taken (host:port
// addresses or URLs chosen earlier and not yet bound): FreeLoopbackAddr
// alone may choose a port twice.
func FreeLoopbackAddrs(host string, n int, taken ...string) ([]string, error) {
	used := make(map[string]bool, n+len(taken))
	for _, t := range taken {
		if u, err := url.Parse(t); err == nil && u.Host != "" {
			t = u.Host
		}
		if _, port, err := net.SplitHostPort(t); err == nil {
			used[port] = true
		}
	}
	addrs := make([]string, 0, n)
	for tries := 0; len(addrs) < n; tries++ {
		if tries == 100*n {
			return nil, fmt.Errorf("embedded: no %d distinct free ports below %d", n, ephemeralStart())
		}
		addr, err := FreeLoopbackAddr(host)
		if err != nil {
			return nil, err
		}
		_, port, _ := net.SplitHostPort(addr)
		if !used[port] {
			used[port] = true
			addrs = append(addrs, addr)
		}
	}
	return addrs, nil
}

// minFreePort is the lowest port FreeLoopbackAddr chooses: above the
// well-known and most registered services' ports.
const minFreePort = 10000

// ephemeralStart is the first port of the kernel's ephemeral range:
// Linux's setting, or 32768 (Linux's default; BSDs, macOS and Windows
// start higher).
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n < minFreePort+1000 {
		return 32768
	}
	return n
}

func isAddrInUse(err error) bool {
	return err != nil && strings.Contains(err.Error(), "address already in use")
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("embedded: %w", err)
	}
	return hex.EncodeToString(b), nil
}

var errNotRunning = errors.New("embedded: member is not running")
