package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/api/v3/version"
)

// buildVersion and buildCommit are set by `make release` with -ldflags
// "-X main.buildVersion=v1.2.3 -X main.buildCommit=<git commit>".
var (
	buildVersion = ""
	buildCommit  = ""
)

func newVersionCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of etcdlock and the etcd client it uses",
		Args:  usageArgs(cobra.NoArgs),
		RunE:  func(*cobra.Command, []string) error { return runVersion(g) },
	}
}

func runVersion(g *globalOptions) error {
	v := map[string]string{"etcdlock": versionString(), "commit": commitString(), "etcd_client": version.Version, "go": runtime.Version()}
	g.printer.Print(v, func(w io.Writer) {
		fmt.Fprintf(w, "etcdlock %s (commit %s, etcd client %s, %s)\n", v["etcdlock"], v["commit"], v["etcd_client"], v["go"])
	})
	return nil
}

func versionString() string {
	if buildVersion != "" {
		return buildVersion
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// commitString is the commit the binary was built from: stamped by the
// release, else the one go build recorded, else "unknown".
func commitString() string {
	if buildCommit != "" {
		return buildCommit
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}
