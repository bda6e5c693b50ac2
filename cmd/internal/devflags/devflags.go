// Package devflags defines the flags of etcdlock-dev once: etcdlock-dev
// parses them, and `etcdlock dev`, which runs etcdlock-dev with its
// arguments untouched, lists them in its help.
package devflags

import (
	"errors"
	"fmt"
	"io"

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
	fs.StringVar(&o.Listen, "listen", DefaultListen, "client address (loopback only; 127.0.0.1:0 picks a free port); a single member's only")
	fs.StringVar(&o.LogLevel, "log-level", "error", "etcd's log level on stderr: debug, info, warn, error")
	fs.IntVar(&o.Members, "members", 1, "number of member processes, each on free loopback ports (1: this process serves the only member)")
}

// Check returns the usage error of the flags parsed into fs, which Bind
// defined, if any: --members below 1, --listen with more than one member,
// an unknown --log-level. Its message names the flags.
func (o *Options) Check(fs *pflag.FlagSet) error {
	switch {
	case o.Members < 1:
		return errors.New("--members must be at least 1")
	case o.Members > 1 && fs.Changed("listen"):
		return errors.New("--listen applies to a single member; with --members every member gets a free port")
	}
	if _, err := logging.New(o.LogLevel, io.Discard); err != nil {
		return fmt.Errorf("--log-level %q: %w", o.LogLevel, err)
	}
	return nil
}
