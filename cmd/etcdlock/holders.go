package main

import (
	"context"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// reportHolders prints who holds name while s waits for it: once, and
// again whenever the holder changes.
func reportHolders(ctx context.Context, g *globalOptions, s *lock.Session, name string) {
	var last fencing.Token
	_ = lock.Follow(ctx, s.Client(), name, func(st lock.Status) bool {
		if h := st.Holder; h != nil && h.LeaseID != s.Lease() && h.Token != last {
			last = h.Token
			g.printer.Note("waiting for lock %q: held by %s (token %s, since %s)", name, h.Owner, h.Token, since(h.Acquired))
		}
		return true
	}, lock.WithPrefix(g.prefix))
}
