package election

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/holders"
	"github.com/etcdlock/etcdlock/pkg/internal/keyspace"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// Leader describes an election's leader. The zero Leader means no one
// leads.
type Leader struct {
	Identity string
	Token    fencing.Token
	Key      string
	// Since is when the term began, on the leader's clock: when its
	// OnStartedLeading was about to run (Term.Started), which is later
	// than its key's creation by the time it queued, and later still when
	// it waited for an earlier term's tenure key to go. It is zero for a
	// leader that had not begun when read (the holder of the leader key
	// still waiting for an earlier term's tenure key), or that writes no
	// tenure key.
	Since time.Time
}

// leaderOf is the leader that st says holds the leader key, its Since
// read from the term's tenure key; with an error, that read's, Since is
// zero.
func leaderOf(ctx context.Context, client *clientv3.Client, prefix string, st holders.Status) (Leader, error) {
	if st.Holder == nil {
		return Leader{}, nil
	}
	h := st.Holder
	l := Leader{Identity: h.Owner, Token: h.Token, Key: h.Key}
	keys := keyspace.Of(prefix, st.Name)
	resp, err := client.Get(ctx, keys.Tenures(), clientv3.WithPrefix())
	if err != nil {
		return l, fmt.Errorf("election: read the tenure keys of %q: %w", st.Name, err)
	}
	own := keys.Tenure(int64(h.LeaseID), int64(h.Token))
	i := slices.IndexFunc(resp.Kvs, func(kv *mvccpb.KeyValue) bool { return string(kv.Key) == own })
	if i < 0 {
		return l, nil
	}
	// An earlier term's key still there: the term waits for it to go,
	// whatever its own key says (it says "not begun" from before the
	// earlier key can go).
	if slices.ContainsFunc(resp.Kvs, func(kv *mvccpb.KeyValue) bool {
		return kv.Lease != 0 && kv.CreateRevision < resp.Kvs[i].CreateRevision
	}) {
		return l, nil
	}
	var v tenureValue
	if json.Unmarshal(resp.Kvs[i].Value, &v) == nil {
		l.Since = v.Started
	}
	return l, nil
}

// GetLeader returns the current leader of the election name under prefix
// (the candidates' lock.WithPrefix, else lock.DefaultPrefix): the zero
// Leader if none. Its errors are holders.Inspect's, and those of the read
// of the term's tenure key that follows.
func GetLeader(ctx context.Context, client *clientv3.Client, prefix, name string) (Leader, error) {
	st, err := holders.Inspect(ctx, client, prefix, name)
	if err != nil {
		return Leader{}, err
	}
	l, err := leaderOf(ctx, client, prefix, st)
	if err != nil {
		return Leader{}, err
	}
	return l, nil
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
// one, the newest. A leader's Since is read once, as it is reported: zero
// if the term had not begun yet (it waited for an earlier term's tenure
// key) or the read failed; it is not reported again once it begins — call
// GetLeader for it. The channel is closed when ctx ends, by the goroutine
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
			var token fencing.Token
			if st.Holder != nil {
				token = st.Holder.Token
			}
			if last != nil && last.Token == token {
				return true
			}
			l, _ := leaderOf(ctx, client, prefix, st) // Since zero if its read failed
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
