package election

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/holders"
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

func leaderOf(st holders.Status) Leader {
	if st.Holder == nil {
		return Leader{}
	}
	h := st.Holder
	return Leader{Identity: h.Owner, Token: h.Token, Key: h.Key, Since: h.Acquired}
}

// GetLeader returns the current leader of the election name under prefix
// (the candidates' lock.WithPrefix, else lock.DefaultPrefix): the zero
// Leader if none. Its errors are holders.Inspect's.
func GetLeader(ctx context.Context, client *clientv3.Client, prefix, name string) (Leader, error) {
	st, err := holders.Inspect(ctx, client, prefix, name)
	if err != nil {
		return Leader{}, err
	}
	return leaderOf(st), nil
}

// Observe reports the current leader of name under prefix, then every
// change of leader (identity or term), learned by watching etcd rather than
// polling.
//
// A nil client, a prefix not ending in '/' or an invalid name is reported
// at once, before etcd is contacted: Observe returns a nil channel and the
// error GetLeader would return (matching lock.ErrInvalidOption or
// lock.ErrInvalidName). It fails for no other reason.
//
// Otherwise the channel receives the leader (the zero Leader if none) as
// of the first successful read of etcd, then each change; etcd errors are
// retried with backoff, never sent. A change is sent only once the previous
// one was received: changes made while the reader is busy are reported as
// one, the newest. The channel is closed when ctx ends, by the goroutine
// feeding it as its last act: drain the channel to wait for it.
func Observe(ctx context.Context, client *clientv3.Client, prefix, name string) (<-chan Leader, error) {
	// Follow would report a nil client too, but on the goroutine below,
	// where it could not be returned.
	if client == nil {
		return nil, fmt.Errorf("%w: nil client", lock.ErrInvalidOption)
	}
	if err := lock.ValidateName(name); err != nil {
		return nil, err
	}
	if !strings.HasSuffix(prefix, "/") {
		return nil, fmt.Errorf("%w: prefix %q must end in '/'", lock.ErrInvalidOption, prefix)
	}
	ch := make(chan Leader)
	go func() {
		defer close(ch)
		var last *Leader
		// Follow checks client, prefix and name as above, so it returns
		// only once ctx ends.
		_ = holders.Follow(ctx, client, prefix, name, func(st holders.Status) bool {
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
		})
	}()
	return ch, nil
}
