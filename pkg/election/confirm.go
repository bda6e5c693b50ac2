package election

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/pkg/lock"
)

// confirmer proves, every third of the handover delay, that a term's key
// is still its own (lock.Lock.Confirm), and ends the term when its last
// proof is older than the delay less the session's safety margin: the
// next leader, which waits the delay after an unclean end, does not start
// before. See the package documentation.
type confirmer struct {
	l       *lock.Lock
	confirm func(context.Context, *lock.Lock) error // lock.Lock.Confirm, or a test's
	clock   lock.Clock                              // the session's
	every   time.Duration                           // between proofs, from the last one's send time
	bound   time.Duration                           // how long a proof lasts, from its send time
	retry   time.Duration                           // between tries after a failure
	log     *zap.Logger

	mu       sync.Mutex
	deadline time.Time // the last proof's send time + bound
	lastErr  error     // the last failure since the last proof
}

// newConfirmer returns the confirmer of l, a term of session s whose
// successor waits delay after an unclean end; confirm is cfg.confirm.
func newConfirmer(s *lock.Session, l *lock.Lock, delay time.Duration, confirm func(context.Context, *lock.Lock) error, log *zap.Logger) *confirmer {
	if confirm == nil {
		confirm = func(ctx context.Context, l *lock.Lock) error { return l.Confirm(ctx) }
	}
	every := delay / 3
	return &confirmer{l: l, confirm: confirm, clock: s.Clock(), every: every, bound: delay - s.SafetyMargin(),
		retry: min(every/4, 250*time.Millisecond), log: log}
}

// Deadline is when the term ends unless a proof comes first.
func (c *confirmer) Deadline() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deadline
}

// first proves the key once, before the term starts, retrying etcd's
// errors. It fails once the lock ends or ctx does.
func (c *confirmer) first(ctx context.Context) error {
	for {
		sent, err := c.prove(ctx)
		if err == nil {
			c.proven(sent)
			return nil
		}
		if err := c.l.Err(); err != nil {
			return err
		}
		t := time.NewTimer(c.retry) // paces requests to etcd: the real clock
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-c.l.Context().Done():
			t.Stop()
			return c.l.Err()
		case <-t.C:
		}
	}
}

// prove sends one proof, bounded by the time between proofs, and returns
// its send time.
func (c *confirmer) prove(ctx context.Context) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, c.every)
	defer cancel()
	sent := c.clock.Now()
	return sent, c.confirm(ctx, c.l)
}

// proven moves the deadline on after a proof sent at sent.
func (c *confirmer) proven(sent time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastErr = nil
	if d := sent.Add(c.bound); d.After(c.deadline) {
		c.deadline = d
	}
}

// run proves the key until ctx, the term's, ends, and ends the term with
// end when the deadline passes first: with a *lock.LostError wrapping
// lock.ErrLost and lock.ErrDeadlinePassed. A proof in flight does not
// hold the deadline back.
func (c *confirmer) run(ctx context.Context, end context.CancelCauseFunc) {
	type result struct {
		sent time.Time
		err  error
	}
	results := make(chan result, 1)
	inflight := false
	pctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		if inflight {
			<-results
		}
	}()
	next := c.clock.NewTimer(c.every)
	defer next.Stop()
	for {
		left := c.Deadline().Sub(c.clock.Now())
		if left <= 0 {
			c.mu.Lock()
			detail := c.lastErr
			c.mu.Unlock()
			end(&lock.LostError{Kind: lock.ErrLost, Cause: lock.ErrDeadlinePassed, Detail: detail, At: c.clock.Now()})
			return
		}
		dl := c.clock.NewTimer(left)
		select {
		case <-ctx.Done():
			dl.Stop()
			return
		case <-dl.C():
		case r := <-results:
			inflight = false
			if r.err == nil {
				c.proven(r.sent)
				next.Reset(max(c.every-c.clock.Since(r.sent), 0))
			} else {
				c.mu.Lock()
				c.lastErr = r.err
				c.mu.Unlock()
				c.log.Warn("could not confirm the leader key; retrying until the term's deadline", zap.Error(r.err))
				next.Reset(c.retry)
			}
		case <-next.C():
			inflight = true
			go func() {
				sent, err := c.prove(pctx)
				results <- result{sent, err}
			}()
		}
		dl.Stop()
	}
}

// termLost is the term's loss, if it was lost: the confirmer's (the
// cause of ctx, the term's) or the lock's; nil if it ended by choice.
func termLost(ctx context.Context, l *lock.Lock) error {
	if cause := context.Cause(ctx); errors.Is(cause, lock.ErrLost) {
		return cause
	}
	if err := l.Err(); errors.Is(err, lock.ErrLost) {
		return err
	}
	return nil
}
