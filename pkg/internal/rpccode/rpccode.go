// Package rpccode tells the gRPC code of an error from etcd's client,
// whichever of its two forms the error takes.
package rpccode

import (
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Of returns the gRPC code err carries, as a gRPC status or as clientv3's
// typed etcd error (rpctypes.EtcdError), wrapped or not; codes.Unknown if
// neither, codes.OK for nil.
func Of(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	if st, ok := status.FromError(err); ok {
		return st.Code()
	}
	var e rpctypes.EtcdError
	if errors.As(err, &e) {
		return e.Code()
	}
	return codes.Unknown
}
