package lock

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/pkg/internal/request"
)

// DefaultTimeout bounds a call whose ctx has no deadline while etcd does not
// answer (NewSession, Release, Close, Break, an acquisition's writes,
// package detached's calls): it
// then fails with an error wrapping ErrUnavailable and DeadlineExceeded.
const DefaultTimeout = request.DefaultTimeout

// firstTryTimeout bounds the first try of a request sent again (retried).
const firstTryTimeout = request.FirstTryTimeout

// retried sends a request that is safe to repeat until etcd answers it,
// each try bounded (see request.Do and DESIGN.md, "A sick member").
func retried[T any](ctx context.Context, c *clientv3.Client, lost func(), try func(context.Context) (T, error)) (T, error) {
	return request.Do(ctx, c, lost, try)
}
