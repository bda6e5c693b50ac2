package embedded

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"go.etcd.io/etcd/server/v3/embed"
)

// Member is one etcd server of a Cluster.
type Member struct {
	cluster                      *Cluster
	name, dir                    string
	clientURL, peerURL           string
	initialCluster, clusterToken string

	mu   sync.Mutex
	etcd *embed.Etcd // nil while stopped
}

// Name returns the member's name (m0, m1, ...).
func (m *Member) Name() string { return m.name }

// Dir returns the member's data directory.
func (m *Member) Dir() string { return m.dir }

// Endpoint returns the member's client URL, http://127.0.0.1:PORT (https://
// with WithClientTLS). It stays the same across restarts.
func (m *Member) Endpoint() string { return m.clientURL }

// PeerURL returns the URL other members use to reach this one.
func (m *Member) PeerURL() string { return m.peerURL }

// Etcd returns the running server, or nil while the member is stopped. Use it
// for operations this package does not wrap (MoveLeader, HashKV, ...).
func (m *Member) Etcd() *embed.Etcd {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.etcd
}

// Running reports whether the member has been started and not stopped.
func (m *Member) Running() bool { return m.Etcd() != nil }

// IsLeader reports whether the member is running and is the raft leader.
func (m *Member) IsLeader() bool {
	e := m.Etcd()
	if e == nil {
		return false
	}
	select {
	case <-e.Server.StopNotify():
		return false
	default:
	}
	return e.Server.Leader() == e.Server.MemberID()
}

// Stop shuts the member down gracefully (leadership is transferred first if
// it leads). Stopping a stopped member does nothing.
func (m *Member) Stop() {
	m.mu.Lock()
	e := m.etcd
	m.etcd = nil
	m.mu.Unlock()
	if e != nil {
		e.Close()
	}
}

// HardStop kills the member abruptly, as a crash would: no leadership
// transfer, no graceful shutdown of the raft loop.
func (m *Member) HardStop() {
	m.mu.Lock()
	e := m.etcd
	m.etcd = nil
	m.mu.Unlock()
	if e != nil {
		e.Server.HardStop()
		e.Close()
	}
}

// Restart starts a stopped member again with the same name, ports and data
// directory, and waits until it is ready to serve or ctx ends.
func (m *Member) Restart(ctx context.Context) error {
	if m.Running() {
		return fmt.Errorf("embedded: restart %s: already running", m.name)
	}
	if err := m.launch(); err != nil {
		return err
	}
	return m.waitReady(ctx)
}

func (m *Member) launch() error {
	cfg := embed.NewConfig()
	cfg.Name = m.name
	cfg.Dir = m.dir
	cu, pu := mustURL(m.clientURL), mustURL(m.peerURL)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = m.initialCluster
	cfg.InitialClusterToken = m.clusterToken
	cfg.ClusterState = embed.ClusterStateFlagNew
	cfg.Logger = "zap"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(m.cluster.logger().Named(m.name))
	cfg.UnsafeNoFsync = m.cluster.cfg.noFsync
	if tls := m.cluster.cfg.clientTLS; tls != nil {
		cfg.ClientTLSInfo = *tls
	}
	if m.cluster.cfg.tick > 0 {
		cfg.TickMs = uint(m.cluster.cfg.tick.Milliseconds())
		cfg.ElectionMs = uint(m.cluster.cfg.election.Milliseconds())
	}
	for _, fn := range m.cluster.cfg.tweak {
		fn(cfg)
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("embedded: start %s: %w", m.name, err)
	}
	m.mu.Lock()
	m.etcd = e
	m.mu.Unlock()
	return nil
}

func (m *Member) waitReady(ctx context.Context) error {
	e := m.Etcd()
	if e == nil {
		return errNotRunning
	}
	select {
	case <-e.Server.ReadyNotify():
		return nil
	case err := <-e.Err():
		return fmt.Errorf("embedded: %s failed: %w", m.name, err)
	case <-ctx.Done():
		return fmt.Errorf("embedded: waiting for %s: %w", m.name, ctx.Err())
	}
}

// String returns the member's name and client URL.
func (m *Member) String() string {
	_, addr, _ := strings.Cut(m.clientURL, "://")
	return m.name + "@" + addr
}
