package rpccode

import (
	"context"
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want codes.Code
	}{
		{nil, codes.OK},
		{context.DeadlineExceeded, codes.Unknown},
		{status.Error(codes.Unavailable, "x"), codes.Unavailable},
		{fmt.Errorf("wrapped: %w", status.Error(codes.ResourceExhausted, "x")), codes.ResourceExhausted},
		{rpctypes.ErrNoLeader, codes.Unavailable},
		{fmt.Errorf("wrapped: %w", rpctypes.ErrTimeout), codes.Unavailable},
		{rpctypes.ErrGRPCNoLeader, codes.Unavailable},
	} {
		if got := Of(tc.err); got != tc.want {
			t.Errorf("Of(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
