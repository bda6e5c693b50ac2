package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/etcdlock/etcdlock/cmd/internal/devflags"
)

// devBinary is the separate program that `etcdlock dev` runs: keeping the
// etcd server out of this binary saves every etcdlock invocation ~20 ms of
// start-up and ~7 MB of memory (measured; see pkg/lock/DESIGN.md).
const devBinary = "etcdlock-dev"

func newDevCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dev [--data-dir D] [--listen 127.0.0.1:2379 | --members N]",
		Short: "Run an etcd for local development: one member, or a cluster of member processes",
		Long: `Start a real etcd server (embedded, single member) listening on --listen, print
its endpoint, and serve until SIGINT or SIGTERM. Without --data-dir the data
lives in a temporary directory removed on exit. Only loopback addresses are
accepted. With --members N, start N member processes forming one cluster
(production raft and fsync settings) and print their endpoints, then one
line per member with its pid: kill one to try failover. With --data-dir
too, the same command restarts that cluster on its data, on the same
endpoints.

This runs the etcdlock-dev program, found next to etcdlock or on PATH
(make build puts it in bin/ beside etcdlock; go install ./cmd/... from
etcdlock's source puts both in your GOBIN), with the flags below; etcdlock's global flags do not apply, and dev's flags are read
from the command line only.`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			// Flags are etcdlock-dev's: --help too, which would print
			// etcdlock-dev's usage line; this command's help says
			// "etcdlock dev".
			if slices.Contains(args, "--help") || slices.Contains(args, "-h") {
				return cmd.Help()
			}
			return runDev(args)
		},
	}
	// The flags are etcdlock-dev's, defined here for the help and the
	// manual: they reach etcdlock-dev as they were given.
	(&devflags.Options{}).Bind(cmd.Flags())
	cmd.Flags().VisitAll(func(f *pflag.Flag) { _ = cmd.Flags().SetAnnotation(f.Name, noEnv, []string{"true"}) })
	cmd.SetUsageTemplate(strings.Replace(cmd.UsageTemplate(), "{{if .HasAvailableInheritedFlags}}", "{{if false}}", 1))
	return cmd
}

func findDevBinary() (string, error) {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), devBinary)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath(devBinary); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s not found next to etcdlock or on PATH: build it from etcdlock's source with make build (bin/ beside etcdlock) or go install ./cmd/%s", devBinary, devBinary)
}
