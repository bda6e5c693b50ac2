package main

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// followHolder calls fn with name's status now and after every change,
// until ctx ends or fn returns false. Changes are learned by watching the
// name's keys, not by polling.
func followHolder(ctx context.Context, g *globalOptions, cli *clientv3.Client, name string, fn func(lock.Status) bool) error {
	for {
		rctx, cancel := g.requestCtx(ctx)
		st, err := lock.Inspect(rctx, cli, name, lock.WithPrefix(g.prefix))
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return g.wrapEtcdErr(err)
		}
		if !fn(st) {
			return nil
		}
		wctx, cancel := context.WithCancel(ctx)
		wch := cli.Watch(wctx, g.prefix+name+"/", clientv3.WithPrefix(), clientv3.WithRev(st.Revision+1))
		for wr := range wch {
			if len(wr.Events) > 0 || wr.Err() != nil {
				break
			}
		}
		cancel()
		for range wch { // drain until the watcher closes the channel
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// reportHolders prints who holds name while s waits for it: once, and
// again whenever the holder changes.
func reportHolders(ctx context.Context, g *globalOptions, s *lock.Session, name string) {
	var last fencing.Token
	_ = followHolder(ctx, g, s.Client(), name, func(st lock.Status) bool {
		if h := st.Holder; h != nil && h.LeaseID != s.Lease() && h.Token != last {
			last = h.Token
			g.printer.Note("waiting for lock %q: held by %s (token %s, since %s)", name, h.Owner, h.Token, since(h.Acquired))
		}
		return true
	})
}
