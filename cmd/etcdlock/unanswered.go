package main

import (
	"context"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// unanswered says whether the last of etcdlock's requests to etcd that
// ended got no answer: it ran into its deadline, or etcd could not be
// reached. Every later request to an etcd in that state (frozen, cut off)
// would wait its own --request-timeout for nothing, so a run then sends
// none beyond that request's own clean-up: it abandons its session, whose
// lease expires within --ttl, instead of revoking it. An answer, even an
// error, clears it: etcd is answering again.
type unanswered struct{ last atomic.Bool }

// Load reports whether the last request that ended got no answer.
func (u *unanswered) Load() bool { return u.last.Load() }

// intercept is a gRPC unary interceptor that records every request's
// outcome. A request canceled by etcdlock itself says nothing of etcd.
func (u *unanswered) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	switch status.Code(err) {
	case codes.DeadlineExceeded, codes.Unavailable:
		u.last.Store(true)
	case codes.Canceled:
	default:
		u.last.Store(false)
	}
	return err
}
