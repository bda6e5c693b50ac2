package main

import (
	"context"
	"fmt"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// reportHolders prints who holds name while s waits for it: once, and
// again whenever the holder changes. It reports whether it printed any.
func reportHolders(ctx context.Context, g *globalOptions, s *lock.Session, name string) (reported bool) {
	var last fencing.Token
	_ = lock.Follow(ctx, s.Client(), name, func(st lock.Status) bool {
		if h := st.Holder; h != nil && h.LeaseID != s.Lease() && h.Token != last {
			last = h.Token
			g.printer.Note("waiting for lock %q: held by %s", name, holderNote(ctx, s, *h))
			reported = true
		}
		return true
	}, lock.WithPrefix(g.prefix))
	return reported
}

// holderNote describes a holder as status does. A key without an
// etcdlock record has no owner or start time: its lease and the lease's
// remaining TTL say who holds it and for how long.
func holderNote(ctx context.Context, s *lock.Session, h lock.Contender) string {
	v := viewOf(h)
	if !v.Foreign {
		return fmt.Sprintf("%s (token %s%s)", v.who(), v.Token, v.when())
	}
	left := ""
	if ttl, err := s.Client().TimeToLive(ctx, h.LeaseID); err == nil {
		left = fmt.Sprintf(", %ds left", ttl.TTL)
	}
	return fmt.Sprintf("%s (token %s, lease %s%s)", v.who(), v.Token, v.Lease, left)
}
