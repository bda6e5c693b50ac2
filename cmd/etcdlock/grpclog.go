package main

import (
	"io"
	"os"

	"google.golang.org/grpc/grpclog"
)

// grpcLogEnv are the variables that configure gRPC's logging
// (GRPC_GO_LOG_*) or, through etcd's client, replace it
// (ETCD_CLIENT_DEBUG).
var grpcLogEnv = []string{"GRPC_GO_LOG_SEVERITY_LEVEL", "GRPC_GO_LOG_VERBOSITY_LEVEL", "GRPC_GO_LOG_FORMATTER", "ETCD_CLIENT_DEBUG"}

// quietGRPCInfo replaces gRPC's default logger with one that writes what
// it writes (errors, on stderr) but reports every verbosity as off, unless
// the environment sets one of grpcLogEnv, and reports whether it did. The
// default reports verbosity 0 as on, so gRPC formats its resolver's state
// as indented JSON for each info line it then drops: about 1 ms of CPU
// per etcdlock run. Called before any client is made.
func quietGRPCInfo() bool {
	for _, v := range grpcLogEnv {
		if os.Getenv(v) != "" {
			return false
		}
	}
	grpclog.SetLoggerV2(grpclog.NewLoggerV2WithVerbosity(io.Discard, io.Discard, os.Stderr, -1))
	return true
}
