// Command etcdlock runs commands under etcd locks, exposes lock operations
// to scripts, and runs a local etcd for development. See `etcdlock --help`.
package main

import (
	"os"
	"os/signal"
	"syscall"

	_ "github.com/etcdlock/etcdlock/cmd/etcdlock/internal/oneproc" // GOMAXPROCS=1, before the other packages initialise
	"github.com/etcdlock/etcdlock/cmd/internal/guardian"
	"github.com/etcdlock/etcdlock/cmd/internal/signals"
)

func main() {
	// `etcdlock run` re-executes this binary as the command's guardian when
	// etcdlock-guardian is not installed beside it.
	if len(os.Args) > 1 && os.Args[1] == guardian.Command {
		os.Exit(guardian.Main(os.Stderr))
	}
	// A write to an output whose reader is gone fails with EPIPE instead
	// of killing etcdlock, which may have a command to stop and a lock to
	// release. Caught, not ignored: children get SIGPIPE's default action.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	quietGRPCInfo()
	code, sig, group := execute(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	if group {
		signals.ReraiseGroup(sig)
	} else {
		signals.Reraise(sig)
	}
	os.Exit(code)
}
