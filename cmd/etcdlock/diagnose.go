package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"path"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/cmd/internal/exitcode"
)

// The etcd client dials lazily and retries until the request's deadline,
// so an etcd it cannot reach shows only as "context deadline exceeded".
// diagnose finds the reason by dialing the endpoints itself: a refused
// connection, an unknown host, a TLS handshake that fails (exit 78), TLS
// on one side only (exit 78), an endpoint that accepts connections but
// does not answer (a frozen etcd).
//
// The probe must not add to the time a call takes: a request still
// unanswered at half its --request-timeout starts it (requestCtx), bounded
// by the request's own deadline, so that the reason is known when the
// request fails. Only an error that came before any such wait (etcd
// refused the request at once) is diagnosed after it, within
// min(diagnoseTimeout, --request-timeout).

// diagnoseTimeout bounds each probe of an endpoint.
const diagnoseTimeout = 2 * time.Second

// probes is the probe of the endpoints that a slow request started.
type probes struct {
	mu      sync.Mutex       // held while a probe starts or is dropped
	cli     *clientv3.Client // the newest client, whose requests start probes (guarded by mu)
	by      context.Context  // the request that started it; nil for none
	wg      sync.WaitGroup
	results []probeResult // set before wg is done
}

// use records cli as the client whose requests start probes: a probe
// asks an endpoint that answers, through it, whether it has a leader.
func (p *probes) use(cli *clientv3.Client) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cli = cli
}

// probeResult is one endpoint's: the reason it fails ("" if it answers as
// configured), and whether the reason is the configuration's.
type probeResult struct {
	reason   string
	isConfig bool
}

// start probes the endpoints for the request of ctx, within its
// deadline, unless a probe is under way or kept.
func (p *probes) start(ctx context.Context, g *globalOptions) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.by != nil || ctx.Err() != nil {
		return
	}
	p.by = ctx
	cli := p.cli
	p.wg.Go(func() { p.results = g.probeAll(ctx, cli) })
}

// ended is called when the request of ctx returns: its probe is kept if
// the request ran into its deadline, for diagnose; dropped if it returned
// before, its results stale for a later failure.
func (p *probes) ended(ctx context.Context, timedOut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.by != ctx || timedOut {
		return
	}
	p.wg.Wait() // ctx is canceled: the probe ends at once
	p.by, p.results = nil, nil
}

// wait returns the results of a probe kept, nil if there is none.
func (p *probes) wait() []probeResult {
	p.mu.Lock()
	started := p.by != nil
	p.mu.Unlock()
	if !started {
		return nil
	}
	p.wg.Wait()
	return p.results
}

// probeAll probes every endpoint at once: an endpoint that drops packets
// takes as long as ctx allows. With cli (nil: none), an endpoint that
// answers is asked whether it has a leader.
func (g *globalOptions) probeAll(ctx context.Context, cli *clientv3.Client) []probeResult {
	results := make([]probeResult, len(g.endpoints))
	var wg sync.WaitGroup
	for i, ep := range g.endpoints {
		wg.Go(func() {
			results[i].reason, results[i].isConfig = g.probe(ctx, ep)
			if results[i].reason == "" && cli != nil {
				results[i].reason = leaderless(ctx, cli, ep)
			}
		})
	}
	wg.Wait()
	return results
}

// diagnose returns err, whose exit code is exitcode.Unavailable, with the
// reason found by probing the endpoints; err as it is if an endpoint
// answers as configured (etcd itself is slow, or has no leader).
func (g *globalOptions) diagnose(err error) error {
	results := g.probes.wait()
	if results == nil {
		ctx, cancel := context.WithTimeout(context.Background(), min(diagnoseTimeout, g.requestTimeout))
		defer cancel()
		results = g.probeAll(ctx, nil) // the request's client is closed
	}
	var reasons []string
	config := false
	for _, r := range results {
		if r.reason == "" {
			return err
		}
		reasons = append(reasons, r.reason)
		config = config || r.isConfig
	}
	d := &unreachableError{reason: strings.Join(reasons, "; "), err: err}
	if config {
		return withCode(exitcode.Config, d)
	}
	return d
}

// unreachableError is an error of an unreachable etcd with the reason
// found by probing its endpoints.
type unreachableError struct {
	reason string
	err    error
}

func (e *unreachableError) Error() string { return e.reason + " (" + e.err.Error() + ")" }
func (e *unreachableError) Unwrap() error { return e.err }

// leaderless is why ep fails although it answers: it has no leader (a
// majority of the members is down or cut off), and waits for one until
// each request's deadline. "" if it has one, or does not say.
func leaderless(ctx context.Context, cli *clientv3.Client, ep string) string {
	ctx, cancel := context.WithTimeout(ctx, diagnoseTimeout)
	defer cancel()
	st, err := cli.Status(ctx, ep)
	if err != nil || st.Leader != 0 {
		return ""
	}
	return fmt.Sprintf("%s answers but has no leader (most members are down or cut off from it)", ep)
}

// probe dials ep as the client would, within ctx and diagnoseTimeout: the
// reason it fails ("" if it answers as configured), and whether the reason
// is the configuration's.
func (g *globalOptions) probe(ctx context.Context, ep string) (reason string, isConfig bool) {
	network, addr := dialAddr(ep)
	ctx, cancel := context.WithTimeout(ctx, diagnoseTimeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Sprintf("%s: no answer to a connection", ep), false
		}
		return fmt.Sprintf("%s: %v", ep, err), false
	}
	defer conn.Close()
	cfg, wantTLS := g.probeTLS(ep, network, addr)
	herr := tls.Client(conn, cfg).HandshakeContext(ctx)
	var rec tls.RecordHeaderError
	switch {
	case ctx.Err() != nil:
		return fmt.Sprintf("%s accepts connections but does not answer (etcd frozen or overloaded)", ep), false
	case wantTLS && (errors.As(herr, &rec) || errors.Is(herr, io.EOF) || errors.Is(herr, syscall.ECONNRESET)):
		// A plain server answers a ClientHello with a plain reply, or
		// closes the connection (etcd does).
		return fmt.Sprintf("%s does not speak TLS, but TLS is configured (--cacert, --cert or https://)", ep), true
	case wantTLS && herr != nil:
		return fmt.Sprintf("TLS handshake with %s: %v", ep, herr), true
	case !wantTLS && herr == nil:
		if network == "unix" {
			return fmt.Sprintf("%s speaks TLS: give --cacert (or unixs:)", ep), true
		}
		if strings.HasPrefix(ep, "http://") {
			return fmt.Sprintf("%s speaks TLS: give https:// (TLS flags do not apply to http://)", ep), true
		}
		return fmt.Sprintf("%s speaks TLS: give --cacert (or https://)", ep), true
	}
	return "", false
}

// dialAddr is the network and address of ep as the client reads ep
// (endpoint.Interpret), then gRPC: a URL's host without its user, a
// socket's path unescaped.
func dialAddr(ep string) (network, addr string) {
	network, addr = "tcp", ep
	switch {
	case strings.HasPrefix(ep, "unix:") || strings.HasPrefix(ep, "unixs:"):
		network, addr = "unix", socketPath(ep)
		if p, err := url.PathUnescape(addr); err == nil {
			addr = p
		}
	case strings.Contains(ep, "://"):
		if u, err := url.Parse(ep); err == nil {
			addr = u.Host
		}
	}
	return network, addr
}

// probeTLS is the TLS configuration of a probe of ep at addr: the
// client's if it speaks TLS to ep (wantTLS), else one that only learns
// whether the server speaks TLS.
func (g *globalOptions) probeTLS(ep, network, addr string) (cfg *tls.Config, wantTLS bool) {
	// The TLS flags apply to every endpoint but http://, for which the
	// client drops them.
	wantTLS = isTLSEndpoint(ep) || g.tlsConfig != nil && !strings.HasPrefix(ep, "http://")
	cfg = &tls.Config{InsecureSkipVerify: true} // only to learn whether the server speaks TLS
	if wantTLS {
		// As the client's: the TLS flags', or else the system's roots.
		cfg = &tls.Config{}
		if g.tlsConfig != nil {
			cfg = g.tlsConfig.Clone()
		}
	}
	if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
		// The name etcd's client gives the address (endpoint.Interpret):
		// a socket's file name.
		host, _, err := net.SplitHostPort(addr)
		if network == "unix" {
			host, err = path.Base(addr), nil
		}
		if err == nil {
			cfg.ServerName = host
		}
	}
	return cfg, wantTLS
}
