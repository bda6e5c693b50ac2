package main

import (
	"fmt"
	"net"
	"net/url"

	"go.etcd.io/etcd/pkg/v3/proxy"
	"go.uber.org/zap"
)

// startProxy forwards a free loopback port to target and returns the proxy
// and the client URL to use.
func startProxy(target string) (proxy.Server, string, error) {
	to, err := url.Parse(target)
	if err != nil {
		return nil, "", err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	addr := l.Addr().String()
	l.Close()
	p := proxy.NewServer(proxy.ServerConfig{Logger: zap.NewNop(), From: url.URL{Scheme: "tcp", Host: addr}, To: url.URL{Scheme: "tcp", Host: to.Host}})
	select {
	case <-p.Ready():
	case err := <-p.Error():
		return nil, "", fmt.Errorf("proxy: %w", err)
	}
	return p, "http://" + addr, nil
}
