// Command etcdlock-guardian is the guardian of `etcdlock run` and
// `etcdlock elect` (see package cmd/internal/guardian): the process that
// starts the command and stops every process of it when the lock is lost,
// also when etcdlock itself is killed or frozen. etcdlock starts it when it
// is installed beside etcdlock (go install .../cmd/..., make build and the
// release archives put it there), and otherwise re-executes itself as the
// guardian. It exists because it links nothing but the guardian, so it
// starts in a few milliseconds where etcdlock's whole initialisation costs
// about 20 ms of CPU per run. It refuses to run unless started by etcdlock.
package main

import (
	"os"

	"github.com/etcdlock/etcdlock/cmd/internal/guardian"
)

func main() {
	os.Exit(guardian.Main(os.Stderr))
}
