// Command etcdlock runs commands under etcd locks, exposes lock operations
// to scripts, and runs a local etcd for development. See `etcdlock --help`.
package main

import (
	"os"

	"github.com/etcdlock/etcdlock/cmd/internal/guardian"
)

func main() {
	// `etcdlock run` re-executes this binary as the command's guardian.
	if len(os.Args) > 1 && os.Args[1] == guardian.Command {
		os.Exit(guardian.Main(os.Stderr))
	}
	os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
