package main

import (
	"testing"

	"google.golang.org/grpc/grpclog"
)

// gRPC's logging is left as the environment sets it; otherwise its info
// lines are off, so that gRPC does not format them.
func TestQuietGRPCInfo(t *testing.T) {
	for _, v := range grpcLogEnv {
		t.Run(v, func(t *testing.T) {
			t.Setenv(v, "info")
			if quietGRPCInfo() {
				t.Errorf("gRPC's logger replaced although %s is set", v)
			}
		})
	}
	for _, v := range grpcLogEnv {
		t.Setenv(v, "") // unset, whatever the machine sets
	}
	if !quietGRPCInfo() {
		t.Fatal("gRPC's logger left as it was with no GRPC_GO_LOG_* or ETCD_CLIENT_DEBUG set")
	}
	if grpclog.V(0) {
		t.Error("gRPC's verbosity 0 is on: gRPC formats info lines it drops")
	}
}
