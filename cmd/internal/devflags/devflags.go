// Package devflags defines the flags of etcdlock-dev once: etcdlock-dev
// parses them, and `etcdlock dev`, which runs etcdlock-dev with its
// arguments untouched, lists them in its help.
package devflags

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/etcdlock/etcdlock/cmd/internal/logging"
)

// DefaultListen is the client address of a single member.
const DefaultListen = "127.0.0.1:2379"

// Options are etcdlock-dev's flags.
type Options struct {
	DataDir  string
	Listen   string
	LogLevel string
	Members  int
}

// Bind defines the flags in fs, bound to o.
func (o *Options) Bind(fs *pflag.FlagSet) {
	fs.StringVar(&o.DataDir, "data-dir", "", "keep etcd's data here (default: a temporary directory)")
	fs.StringVar(&o.Listen, "listen", DefaultListen, "client address: a loopback IP and a port, 127.0.0.1:PORT or [::1]:PORT (port 0 picks a free one; not localhost, which may resolve to either); a single member's only")
	fs.StringVar(&o.LogLevel, "log-level", "error", "etcd's log level on stderr: debug, info, warn, error")
	fs.IntVar(&o.Members, "members", 1, "number of member processes, each on free loopback ports (1: this process serves the only member)")
}

// Check returns the usage error of the flags parsed into fs, which Bind
// defined, if any: --members below 1, --listen with more than one member
// or not a loopback IP with a port, an unknown --log-level. Its message
// names the flags.
func (o *Options) Check(fs *pflag.FlagSet) error {
	switch {
	case o.Members < 1:
		return errors.New("--members must be at least 1")
	case o.Members > 1 && fs.Changed("listen"):
		return errors.New("--listen applies to a single member; with --members every member gets a free port")
	}
	if err := checkListen(o.Listen); err != nil {
		return fmt.Errorf("--listen %q: %w; want a loopback IP and a port, 127.0.0.1:PORT or [::1]:PORT (0 picks a free port)", o.Listen, err)
	}
	if _, err := logging.New(o.LogLevel, io.Discard); err != nil {
		return fmt.Errorf("--log-level %q: %w", o.LogLevel, err)
	}
	return nil
}

// checkListen says what is wrong with addr as a client address: the
// development etcd serves no one but this host, and etcd binds an IP, so
// a host name, even localhost (which may resolve to 127.0.0.1 for the
// server and to ::1 for a client), is refused.
func checkListen(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("not host:port")
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q is not a loopback IP", host)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || strconv.FormatUint(n, 10) != port {
		return fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	return nil
}
