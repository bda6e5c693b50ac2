package holders

import (
	"context"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/pkg/internal/backoff"
	"github.com/etcdlock/etcdlock/pkg/internal/keyspace"
	"github.com/etcdlock/etcdlock/pkg/internal/watchmux"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// Follow calls fn with the status of name under prefix now and after every
// change of its holders, learned by watching etcd, until ctx ends
// (returning nil) or fn returns false. A status whose holders did not
// change is not reported, nor a holder that comes and goes between two
// reads. It retries etcd errors; it returns an error only for an invalid
// argument, at once.
func Follow(ctx context.Context, client *clientv3.Client, prefix, name string, fn func(Status) bool) error {
	if err := validate(client, prefix); err != nil {
		return err
	}
	if err := lock.ValidateName(name); err != nil {
		return err
	}
	mctx, stop := context.WithCancel(ctx)
	mux, ran := watchmux.ForClient(client, zap.NewNop()), make(chan struct{})
	go func() {
		defer close(ran)
		mux.Run(mctx)
	}()
	defer func() {
		stop()
		<-ran
	}()
	keys := keyspace.Of(prefix, name)
	retry := backoff.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second}
	var last []Contender
	for first := true; ctx.Err() == nil; {
		st, err := followRead(ctx, client, prefix, name)
		if err != nil {
			_ = backoff.Sleep(ctx, retry.Next())
			continue
		}
		retry.Reset()
		if first || !sameHolders(last, st.Holders) {
			if !fn(st) {
				return nil
			}
			first, last = false, st.Holders
		}
		waitChange(ctx, mux, keys, st)
	}
	return nil
}

// readTryTimeout bounds one read of Follow: the next goes to the client's
// next endpoint.
const readTryTimeout = 5 * time.Second

// followRead reads the status of name for Follow, within readTryTimeout:
// the next read goes to the client's next endpoint.
func followRead(ctx context.Context, client *clientv3.Client, prefix, name string) (Status, error) {
	ctx, cancel := context.WithTimeout(ctx, readTryTimeout)
	defer cancel()
	return readStatus(ctx, client, prefix, name)
}

// sameHolders reports whether a and b list the same holders: the same
// keys with the same tokens, in the same order.
func sameHolders(a, b []Contender) bool {
	return slices.EqualFunc(a, b, func(x, y Contender) bool { return x.Key == y.Key && x.Token == y.Token })
}

// waitChange waits until the holders of the name keys may have changed
// since st, or ctx ends. While a mutex is held it waits for the holder's
// key to go; while the name is free, or may have several holders (a
// semaphore, readers), for any change of its keys (a semaphore's slots
// included). Waiters joining or leaving a held mutex wake no one. Any end
// of a watch (a broken stream, compaction, a refusal) returns too: the
// caller reads again.
func waitChange(ctx context.Context, mux *watchmux.Mux, keys keyspace.Name, st Status) {
	changed := make(chan struct{}, 1)
	fire := func(error) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	var ranges []watchmux.Range
	switch h := st.Holder; {
	case h == nil || h.Shared:
		ranges = []watchmux.Range{prefixRange(keys.Contenders(), st.Revision)}
	case h.Limit > 0:
		ranges = []watchmux.Range{prefixRange(keys.Contenders(), st.Revision), prefixRange(keys.Slots(), st.Revision)}
	default:
		ranges = []watchmux.Range{{Key: h.Key, Rev: st.Revision + 1}}
	}
	for _, r := range ranges {
		defer mux.Remove(mux.WatchRange(r, nil, fire, nil))
	}
	// An AcquireAll set at the head of the queue that waits for another
	// of its names becomes the holder without any change under this name:
	// read again every second while one does.
	var recheck <-chan time.Time
	if st.Holder == nil && len(st.Waiters) > 0 {
		t := time.NewTimer(time.Second)
		defer t.Stop()
		recheck = t.C
	}
	select {
	case <-changed:
	case <-recheck:
	case <-ctx.Done():
	}
}

// prefixRange is a watch of every change under pfx after revision rev.
func prefixRange(pfx string, rev int64) watchmux.Range {
	return watchmux.Range{Key: pfx, End: clientv3.GetPrefixRangeEnd(pfx), Rev: rev + 1, Puts: true}
}
