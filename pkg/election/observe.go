package election

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// Leader describes an election's leader. The zero Leader means no one
// leads.
type Leader struct {
	Identity string
	Token    fencing.Token
	Key      string
	Since    time.Time // when the leader says it started (its clock)
}

func leaderOf(st lock.Status) Leader {
	if st.Holder == nil {
		return Leader{}
	}
	h := st.Holder
	return Leader{Identity: h.Owner, Token: h.Token, Key: h.Key, Since: h.Acquired}
}

// GetLeader returns the current leader of the election name (the zero
// Leader if none). opts may set WithPrefix; other options are rejected
// with lock.ErrInvalidOption.
func GetLeader(ctx context.Context, client *clientv3.Client, name string, opts ...lock.Option) (Leader, error) {
	st, err := lock.Inspect(ctx, client, name, opts...)
	if err != nil {
		return Leader{}, err
	}
	return leaderOf(st), nil
}

// Observe sends the current leader of name, then every change of leader
// (identity or term), learned by watching etcd rather than polling. The
// channel is closed when ctx ends; until then the goroutine behind it
// retries etcd errors. Read the channel promptly: a change is sent only
// once the previous one was received. opts may set WithPrefix; an invalid
// name or option closes the channel at once (GetLeader returns the error).
func Observe(ctx context.Context, client *clientv3.Client, name string, opts ...lock.Option) <-chan Leader {
	ch := make(chan Leader)
	go func() {
		defer close(ch)
		var last *Leader
		_ = lock.Follow(ctx, client, name, func(st lock.Status) bool {
			l := leaderOf(st)
			if last != nil && last.Token == l.Token {
				return true
			}
			select {
			case ch <- l:
				last = &l
				return true
			case <-ctx.Done():
				return false
			}
		}, opts...)
	}()
	return ch
}
