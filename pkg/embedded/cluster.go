package embedded

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
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
	var initial []string
	for i := range c.members {
		m := &Member{cluster: c, name: fmt.Sprintf("m%d", i), dir: filepath.Join(base, fmt.Sprintf("m%d", i))}
		if mo := c.cfg.memberOf; mo != nil {
			m.name, m.dir = mo.name, filepath.Join(base, mo.name)
		}
		m.clientURL, m.peerURL = c.cfg.clientAddr, ""
		if m.clientURL == "" {
			if m.clientURL, err = freeLoopbackAddr(cmp.Or(c.cfg.clientHost, "127.0.0.1")); err != nil {
				return err
			}
		}
		if c.cfg.memberOf == nil {
			if m.peerURL, err = freeLoopbackAddr("127.0.0.1"); err != nil {
				return err
			}
			m.peerURL = "http://" + m.peerURL
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

// freeLoopbackAddr returns host:port with a port free at the moment.
func freeLoopbackAddr(host string) (string, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", fmt.Errorf("embedded: finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
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
