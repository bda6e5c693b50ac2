package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/api/v3/version"
)

// buildVersion is set with -ldflags "-X main.buildVersion=v1.2.3".
var buildVersion = ""

func newVersionCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of etcdlock and the etcd client it uses",
		Args:  cobra.NoArgs,
		RunE:  func(*cobra.Command, []string) error { return runVersion(g) },
	}
}

func runVersion(g *globalOptions) error {
	v := map[string]string{"etcdlock": versionString(), "etcd_client": version.Version, "go": runtime.Version()}
	g.printer.Print(v, func(w io.Writer) {
		fmt.Fprintf(w, "etcdlock %s (etcd client %s, %s)\n", v["etcdlock"], v["etcd_client"], v["go"])
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
