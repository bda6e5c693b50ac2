package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/etcdlock/etcdlock/cmd/internal/exitcode"
)

// The etcd client dials lazily and retries until the request's deadline,
// so an etcd it cannot reach shows only as "context deadline exceeded".
// diagnose finds the reason by dialing the endpoints itself: a refused
// connection, an unknown host, a TLS handshake that fails (exit 78), TLS
// on one side only (exit 78).

// diagnoseTimeout bounds each probe of an endpoint.
const diagnoseTimeout = 2 * time.Second

// diagnose returns err, whose exit code is exitcode.Unavailable, with the
// reason found by probing the endpoints; err as it is if every endpoint
// answers as configured (etcd itself is slow, or has no leader).
func (g *globalOptions) diagnose(err error) error {
	// All at once: an endpoint that drops packets takes the whole
	// diagnoseTimeout.
	type result struct {
		reason   string
		isConfig bool
	}
	results := make([]result, len(g.endpoints))
	var wg sync.WaitGroup
	for i, ep := range g.endpoints {
		wg.Go(func() {
			results[i].reason, results[i].isConfig = g.probe(ep)
		})
	}
	wg.Wait()
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

// probe dials ep as the client would: the reason it fails ("" if it
// answers as configured), and whether the reason is the configuration's.
func (g *globalOptions) probe(ep string) (reason string, isConfig bool) {
	scheme, addr, ok := strings.Cut(ep, "://")
	if !ok {
		scheme, addr = "", ep
	}
	network := "tcp"
	if strings.HasPrefix(scheme, "unix") {
		network = "unix"
	}
	ctx, cancel := context.WithTimeout(context.Background(), diagnoseTimeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return fmt.Sprintf("%s: %v", ep, err), false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(diagnoseTimeout))
	wantTLS := g.tlsConfig != nil || scheme == "https" || scheme == "unixs"
	cfg := &tls.Config{InsecureSkipVerify: true} // only to learn whether the server speaks TLS
	if wantTLS && g.tlsConfig != nil {
		cfg = g.tlsConfig.Clone()
	}
	if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
		host, _, _ := net.SplitHostPort(addr)
		cfg.ServerName = host
	}
	herr := tls.Client(conn, cfg).HandshakeContext(ctx)
	var rec tls.RecordHeaderError
	switch {
	case wantTLS && (errors.As(herr, &rec) || errors.Is(herr, io.EOF) || errors.Is(herr, syscall.ECONNRESET)):
		// A plain server answers a ClientHello with a plain reply, or
		// closes the connection (etcd does).
		return fmt.Sprintf("%s does not speak TLS, but TLS is configured (--cacert, --cert or https://)", ep), true
	case wantTLS && herr != nil:
		return fmt.Sprintf("TLS handshake with %s: %v", ep, herr), true
	case !wantTLS && herr == nil:
		return fmt.Sprintf("%s speaks TLS: give --cacert (or https://)", ep), true
	}
	return "", false
}
