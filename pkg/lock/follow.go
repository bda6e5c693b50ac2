package lock

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/pkg/internal/backoff"
	"github.com/etcdlock/etcdlock/pkg/internal/watchmux"
	"github.com/etcdlock/etcdlock/pkg/lock/internal/keyspace"
)

// Follow calls fn with the status of name now and after every change of
// holder, until ctx ends (returning nil) or fn returns false. It learns of
// changes by watching etcd, not by polling: the holder's key while the name
// is held, the name's prefix while it is free, so waiters joining or
// leaving wake no one. (While an AcquireAll set heads the queue but waits
// for another of its names, it also reads again every second: the set
// takes this name without a change under it.) Its watches are a session's
// (see Lock): one stream, opened under clientv3.WithRequireLeader, asked
// for progress when silent. It retries etcd errors with backoff and
// re-reads the state after any broken or compacted watch. It returns an
// error only for a nil client or an invalid name or option, at once. Its
// option is WithPrefix; a nil or invalid one fails with ErrInvalidOption.
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
	prefix := keyspace.Of(cfg.prefix, name).Contenders()
	retry := backoff.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second}
	for ctx.Err() == nil {
		st, err := readStatus(ctx, client, cfg.prefix, name)
		if err != nil {
			_ = backoff.Sleep(ctx, retry.Next())
			continue
		}
		retry.Reset()
		if !fn(st) {
			return nil
		}
		waitChange(ctx, mux, prefix, st)
	}
	return nil
}

// waitChange waits until the holder of the name whose contenders prefix is
// prefix may have changed since st, or ctx ends. Only a change of holder
// matters: it waits for the holder's key to go, or, while the name is
// free, for the first key to appear. Waiters joining or leaving wake no
// one. Any end of the watch (a broken stream, compaction, a refusal)
// returns too: the caller reads again.
func waitChange(ctx context.Context, mux *watchmux.Mux, prefix string, st Status) {
	r := watchmux.Range{Key: prefix, End: clientv3.GetPrefixRangeEnd(prefix), Rev: st.Revision + 1, Puts: true}
	if st.Holder != nil {
		r = watchmux.Range{Key: st.Holder.Key, Rev: st.Revision + 1}
	}
	changed := make(chan struct{}, 1)
	w := mux.WatchRange(r, nil, func(error) { changed <- struct{}{} }, nil)
	defer mux.Remove(w)
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
