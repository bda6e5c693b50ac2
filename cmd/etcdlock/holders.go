package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/holders"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// reportHolders prints who holds name while s waits for it: once, and
// again whenever the holder changes. It reports whether it printed any.
// waiting is closed when the acquisition waits (lock.WithWaitHook).
func reportHolders(ctx context.Context, g *globalOptions, s *session, name string, waiting <-chan struct{}) (reported bool) {
	// Only a run that waits, and still waits after noteAfter, says whom
	// it waits for: a reader beside readers, a semaphore with a free slot
	// and a refusal (another kind, 76) wait for nobody, however slow etcd
	// is to say so.
	select {
	case <-waiting:
	case <-ctx.Done():
		return false
	}
	t := time.NewTimer(noteAfter)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return false
	}
	var last []fencing.Token
	_ = holders.Follow(ctx, s.cli, g.prefix, name, func(st holders.Status) bool {
		var others []holders.Contender
		for _, h := range st.Holders {
			if h.LeaseID != s.Lease() {
				others = append(others, h)
			}
		}
		if len(others) == 0 || others[0].Slot >= 0 && len(st.Holders) < others[0].Limit {
			// No holder, or a semaphore with a slot free: a waiter ahead
			// is about to claim it, and then the holders are noted.
			return true
		}
		tokens := make([]fencing.Token, len(others))
		for i, h := range others {
			tokens[i] = h.Token
		}
		if !slices.Equal(tokens, last) {
			last = tokens
			g.printer.Note("waiting for lock %q: held by %s%s", name, holdersNote(ctx, s, others), writerAhead(st, s.Lease()))
			reported = true
		}
		return true
	})
	return reported
}

// holdersNote describes the holders of a name as status does: one holder
// of a mutex by holderNote, readers and a semaphore's holders counted and
// listed.
func holdersNote(ctx context.Context, s *session, holders []holders.Contender) string {
	if h := holders[0]; len(holders) == 1 && !h.Shared && h.Slot < 0 {
		return holderNote(ctx, s, h)
	}
	views := viewsOf(holders)
	return fmt.Sprintf("%s: %s", heldBy(views), holderList(views))
}

// writerAhead is, when readers hold st's name and a writer other than
// the lease own waits first, what a reader arriving now waits for: that
// writer, then them; "" otherwise.
func writerAhead(st holders.Status, own clientv3.LeaseID) string {
	if len(st.Holders) == 0 || !st.Holders[0].Shared || len(st.Waiters) == 0 || st.Waiters[0].Shared || st.Waiters[0].LeaseID == own {
		return ""
	}
	w := viewOf(st.Waiters[0])
	return fmt.Sprintf("; a writer waits for them first (%s, token %s), and readers queue behind it", w.who(), w.Token)
}

// holderList lists holders, each with its token and since when.
func holderList(views []contenderView) string {
	parts := make([]string, len(views))
	for i, h := range views {
		parts[i] = fmt.Sprintf("%s (token %s%s)", h.who(), h.Token, h.when())
	}
	return strings.Join(parts, ", ")
}

// noteAfter is how long a run waits before it says whom it waits for.
const noteAfter = 250 * time.Millisecond

// holderNote describes a holder as status does. A key without an
// etcdlock record has no owner or start time: its lease and the lease's
// remaining TTL say who holds it and for how long.
func holderNote(ctx context.Context, s *session, h holders.Contender) string {
	v := viewOf(h)
	if !v.Foreign {
		return fmt.Sprintf("%s (token %s%s)", v.who(), v.Token, v.when())
	}
	left := ""
	if ttl, err := s.cli.TimeToLive(ctx, h.LeaseID); err == nil {
		left = fmt.Sprintf(", %ds left", ttl.TTL)
	}
	return fmt.Sprintf("%s (token %s, lease %s%s)", v.who(), v.Token, v.Lease, left)
}

// heldError is a refusal (a *lock.LockedError, which names one contender:
// for a reader, the writer it would queue behind, which may itself wait)
// with every holder of the name, read just after it, when they are
// readers or a semaphore's holders.
type heldError struct {
	err error
	st  holders.Status
}

func (e *heldError) Error() string { return e.err.Error() }
func (e *heldError) Unwrap() error { return e.err }

// withHolders is err, a refusal of name, with the name's holders unless
// it names the one holder; err as it is if it is no refusal or they cannot
// be read.
func (g *globalOptions) withHolders(ctx context.Context, cli *clientv3.Client, err error, name string) error {
	var locked *lock.LockedError
	if !errors.As(err, &locked) {
		return err
	}
	rctx, cancel := g.requestCtx(context.WithoutCancel(ctx))
	defer cancel()
	st, ierr := holders.Inspect(rctx, cli, g.prefix, name)
	if ierr != nil || len(st.Holders) == 0 && len(st.Waiters) == 0 {
		return err
	}
	if len(st.Holders) == 0 {
		return &heldError{err: err, st: st} // refused by a waiter: a set waiting for another name
	}
	if h := st.Holders[0]; len(st.Holders) == 1 && (h.Token == locked.Token || !h.Shared && h.Slot < 0) {
		return err // the refusal names the one holder
	}
	return &heldError{err: err, st: st}
}

// explain is the message of a refusal by several holders: each of them,
// and the writer that a reader would queue behind.
func (e *heldError) explain() string {
	if len(e.st.Holders) == 0 {
		first := e.st.Waiters[0]
		w := viewOf(first)
		what := "its turn"
		if len(first.Names) > 1 {
			what = lockNames(first.Names)
		}
		return fmt.Sprintf("lock %q is not held, but %s queued before this run: the first, %s (token %s), waits for %s",
			e.st.Name, plural(len(e.st.Waiters), "waiter"), w.who(), w.Token, what)
	}
	views := viewsOf(e.st.Holders)
	return fmt.Sprintf("lock %q is held by %s: %s%s", e.st.Name, heldBy(views), holderList(views), writerAhead(e.st, 0))
}
