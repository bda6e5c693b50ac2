package embedded

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Option configures Start.
type Option interface{ apply(*config) error }

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	members    int
	dir        string
	logger     *zap.Logger
	tick       time.Duration
	election   time.Duration
	noFsync    bool
	clientAddr string // fixed client address, or "" for a free port
	clientHost string // loopback IP of a free client port, "" for 127.0.0.1
	clientTLS  *transport.TLSInfo
	tweak      []func(*embed.Config)
	memberOf   *memberOf // one member of a cluster spread over processes
}

// memberOf is what WithMemberOf sets.
type memberOf struct {
	name, peerURL, initialCluster, token string
}

func defaultConfig() config {
	return config{members: 1, logger: zap.NewNop()}
}

// WithMembers sets the number of members (default 1). n must be at least 1.
func WithMembers(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 1 {
			return fmt.Errorf("embedded: member count %d: must be at least 1", n)
		}
		c.members = n
		return nil
	})
}

// WithDir keeps the members' data under dir (member i in dir/m<i>), which
// Close leaves in place. Without it, Start uses a new temporary directory
// that Close removes.
func WithDir(dir string) Option {
	return optionFunc(func(c *config) error {
		if dir == "" {
			return fmt.Errorf("embedded: empty data directory")
		}
		c.dir = dir
		return nil
	})
}

// WithLogger sends the servers' logs to lg. The default discards them.
func WithLogger(lg *zap.Logger) Option {
	return optionFunc(func(c *config) error {
		if lg == nil {
			return fmt.Errorf("embedded: nil logger")
		}
		c.logger = lg
		return nil
	})
}

// WithRaftTiming sets the heartbeat interval and election timeout (etcd's
// defaults are 100ms and 1s). Faster settings make failover tests quicker;
// note that etcd's minimum lease TTL is ceil(1.5 × election) seconds.
func WithRaftTiming(heartbeat, election time.Duration) Option {
	return optionFunc(func(c *config) error {
		if heartbeat <= 0 || election < 5*heartbeat {
			return fmt.Errorf("embedded: raft timing %v/%v: need heartbeat > 0 and election >= 5×heartbeat", heartbeat, election)
		}
		c.tick, c.election = heartbeat, election
		return nil
	})
}

// WithUnsafeNoFsync disables fsync, trading durability across machine
// crashes for speed. Process restarts keep their data either way.
func WithUnsafeNoFsync() Option {
	return optionFunc(func(c *config) error { c.noFsync = true; return nil })
}

// WithClientAddr serves clients on addr (host:port, host must be a loopback
// IP) instead of a free port; port 0 picks a free port on that host, which
// Endpoints reports. Only valid with a single member.
func WithClientAddr(addr string) Option {
	return optionFunc(func(c *config) error {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return fmt.Errorf("embedded: client address %q: %w", addr, err)
		}
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			return fmt.Errorf("embedded: client address %q: host must be a loopback IP", addr)
		}
		if port == "0" {
			c.clientAddr, c.clientHost = "", host
		} else {
			c.clientAddr, c.clientHost = addr, ""
		}
		return nil
	})
}

// WithMemberOf starts one member, name, of a cluster whose members run in
// several processes (each calls Start with this option and its own name):
// initialCluster lists every member as name=peerURL (etcd's
// --initial-cluster; every peer URL an http:// loopback URL), token is the
// cluster's --initial-cluster-token. Start then returns once this member
// has joined and the cluster serves it, which needs a majority of the
// members running. The client address is WithClientAddr's (a free port
// without it); WithMembers must stay 1.
func WithMemberOf(name, initialCluster, token string) Option {
	return optionFunc(func(c *config) error {
		if token == "" {
			return fmt.Errorf("embedded: empty cluster token")
		}
		peers := map[string]string{}
		for _, entry := range strings.Split(initialCluster, ",") {
			n, u, ok := strings.Cut(entry, "=")
			if !ok || n == "" {
				return fmt.Errorf("embedded: initial cluster entry %q: want name=peerURL", entry)
			}
			pu, err := url.Parse(u)
			if err != nil || pu.Scheme != "http" {
				return fmt.Errorf("embedded: peer URL %q of %s: want http://host:port", u, n)
			}
			if ip := net.ParseIP(pu.Hostname()); ip == nil || !ip.IsLoopback() || pu.Port() == "" {
				return fmt.Errorf("embedded: peer URL %q of %s: host must be a loopback IP, with a port", u, n)
			}
			if _, dup := peers[n]; dup {
				return fmt.Errorf("embedded: member %s listed twice", n)
			}
			peers[n] = u
		}
		if _, ok := peers[name]; !ok {
			return fmt.Errorf("embedded: member %q is not in the initial cluster %q", name, initialCluster)
		}
		c.memberOf = &memberOf{name: name, peerURL: peers[name], initialCluster: initialCluster, token: token}
		return nil
	})
}

// WithConfig lets the caller adjust each member's embed.Config before it
// starts (TLS, authentication, quotas). fn must not change names, URLs or
// directories.
func WithConfig(fn func(*embed.Config)) Option {
	return optionFunc(func(c *config) error {
		if fn == nil {
			return fmt.Errorf("embedded: nil config function")
		}
		c.tweak = append(c.tweak, fn)
		return nil
	})
}

// WithClientTLS serves clients over TLS (https:// endpoints) with info's
// certificate, key and, when ClientCertAuth is set, client-certificate
// verification against info.TrustedCAFile.
func WithClientTLS(info transport.TLSInfo) Option {
	return optionFunc(func(c *config) error {
		if info.CertFile == "" || info.KeyFile == "" {
			return fmt.Errorf("embedded: client TLS needs a certificate and a key")
		}
		c.clientTLS = &info
		return nil
	})
}
