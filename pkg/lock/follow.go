package lock

import (
	"context"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/pkg/internal/backoff"
	"github.com/etcdlock/etcdlock/pkg/internal/keyspace"
	"github.com/etcdlock/etcdlock/pkg/internal/watchmux"
)

// Follow calls fn with the status of name now and after every change of
// its holders (Status.Holders: a holder's end, a semaphore's or a read-write
// lock's holders joining), until ctx ends (returning nil) or fn returns
// false. It learns of changes by watching etcd, not by polling: the
// holder's key while a mutex is held, the name's keys while it is free or
// has several holders, so waiters joining or leaving a held mutex wake no
// one, and a status whose holders did not change is not reported. (While
// an AcquireAll set heads the queue but waits for another of its names,
// it also reads again every second: the set takes this name without a
// change under it.) Its watches are a session's (see Lock): one stream,
// opened under clientv3.WithRequireLeader, asked for progress when
// silent. Each read gets 5 s; it retries etcd errors with backoff and
// re-reads the state after any broken or compacted watch. A holder that
// comes and goes between two reads is not reported. It returns an error
// only for a nil client or an invalid name or option, at once. Its option
// is WithPrefix; a nil or invalid one fails with ErrInvalidOption.
func Follow(ctx context.Context, client *clientv3.Client, name string, fn func(Status) bool, opts ...ReadOption) error {
	if err := validateClient(client); err != nil {
		return err
	}
	if err := ValidateName(name); err != nil {
		return err
	}
	cfg, err := newConfig(opts)
	if err != nil {
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
	keys := keyspace.Of(cfg.prefix, name)
	retry := backoff.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second}
	var last []Contender
	for first := true; ctx.Err() == nil; {
		st, err := followRead(ctx, client, cfg.prefix, name)
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
