package main

import (
	"context"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// unanswered says whether etcd stopped answering etcdlock's requests: the
// latest sent of those that ended got no answer — it ran into its
// deadline, or etcd could not be reached — and none sent after it was
// answered. Every later request to an etcd in that state (frozen, cut off)
// would wait its own --request-timeout for nothing, so a run then sends
// none beyond that request's own clean-up: it abandons its session, whose
// lease expires within --ttl, instead of revoking it. An answer, even an
// error, to a request sent later clears it: etcd is answering again. A try
// that one sick member held past its own bound, while a try sent after it
// went to another member and was answered, does not set it: the lock's
// requests bound their tries so, and a run that abandoned its session for
// that would keep the name taken for a TTL after its command.
type unanswered struct {
	mu       sync.Mutex
	sent     uint64 // requests sent so far; each is numbered in order
	answered uint64 // the number of the latest sent that was answered
	silent   uint64 // the number of the latest sent that got no answer
}

// Load reports whether the latest sent of the requests that ended got no
// answer, and none sent after it was answered.
func (u *unanswered) Load() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.silent > u.answered
}

// send numbers a request about to be sent.
func (u *unanswered) send() uint64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.sent++
	return u.sent
}

// ended records how request n, sent as the n-th, ended: answered or not.
func (u *unanswered) ended(n uint64, answered bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if answered {
		u.answered = max(u.answered, n)
	} else {
		u.silent = max(u.silent, n)
	}
}

// intercept is a gRPC unary interceptor that records every request's
// outcome. A request canceled by etcdlock itself says nothing of etcd.
func (u *unanswered) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	n := u.send()
	err := invoker(ctx, method, req, reply, cc, opts...)
	switch status.Code(err) {
	case codes.DeadlineExceeded, codes.Unavailable:
		u.ended(n, false)
	case codes.Canceled:
	default:
		u.ended(n, true)
	}
	return err
}
