// Package oneproc sets GOMAXPROCS to 1 for etcdlock, unless the
// environment sets GOMAXPROCS to a value (empty is unset, as for the Go
// runtime). It imports only runtime and syscall, so it initialises before
// the etcd client, gRPC and protobuf packages do: a program's packages
// initialise in import-path order as their dependencies allow, and this
// path sorts before theirs.
//
// A client command waits on etcd and on its command almost all the time. A
// second P only adds threads that wake and spin for work, in those
// packages' initialisation and in every request after it: about 3.5 ms of
// a short `etcdlock run`'s 55 ms of CPU, half of it saved only by setting
// GOMAXPROCS before the initialisation (hack/bench-cli.sh measures it).
// `etcdlock dev` replaces itself with etcdlock-dev, or runs it as a child
// on Windows, with the environment it was given: the etcd server keeps
// every CPU. The commands etcdlock starts get that environment too.
//
// The test binary of package main links it as well; its TestMain restores
// the default.
package oneproc

import (
	"runtime"
	"syscall"
)

func init() {
	if v, _ := syscall.Getenv("GOMAXPROCS"); v == "" {
		runtime.GOMAXPROCS(1)
	}
}
