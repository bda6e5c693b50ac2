// Package backoff is the exponential backoff of the retry loops of the
// lock, the election and kubelock: a lock waiter's reads, the watch
// stream's reconnects and re-reads, Follow, an elector's campaigns, and
// kubelock's term watch. (A lease's renewals retry at a fixed period
// derived from the TTL.)
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is an exponential backoff: the first wait is Min, and each one
// after doubles, up to Max. With Jitter each wait is drawn from [w/2, w]
// for the w it would be ("equal jitter"), so that clients that an event
// interrupted together (a leader election, a broken connection) do not
// retry in step. A Backoff is not safe for concurrent use; its zero value
// never waits.
type Backoff struct {
	Min, Max time.Duration
	Jitter   bool
	next     time.Duration // 0: Min
}

// Next returns the wait before the next try, and doubles the one after.
func (b *Backoff) Next() time.Duration {
	w := b.next
	if w == 0 {
		w = b.Min
	}
	b.next = min(2*w, b.Max)
	if b.Jitter {
		return w/2 + rand.N(w/2+1)
	}
	return w
}

// Reset makes the next wait Min again: the caller's last try worked.
func (b *Backoff) Reset() { b.next = 0 }

// Sleep waits for d on the real clock, which paces requests to a server.
// It returns ctx.Err() if ctx ends first, else nil.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
