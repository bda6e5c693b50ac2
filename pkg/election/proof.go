package election

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/pkg/lock"
)

// prove proves once, bounded by the time between proofs, that the leader
// key and the tenure key are still the term's, and only then renews the
// tenure lease. It returns the proof's send time: the tenure key cannot
// expire before it + ttl. It fails with errTenureGone when the tenure key
// or its lease is gone, with the lock's error when the leader key is.
func (t *tenure) prove(ctx context.Context) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, t.every)
	defer cancel()
	sent := t.clock.Now()
	if t.fault != nil {
		if err := t.fault(); err != nil {
			return sent, err
		}
	}
	// etcd serves a transaction of comparisons only from the member's own
	// state (serializably); a Get in it makes the read linearizable.
	resp, err := t.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(t.l.Key()), "=", int64(t.l.Token())),
			clientv3.Compare(clientv3.LeaseValue(t.key), "=", t.lease)).
		Then(clientv3.OpGet(t.l.Key(), clientv3.WithCountOnly())).
		Commit()
	if err != nil {
		return sent, err
	}
	if !resp.Succeeded {
		if err := t.l.Confirm(ctx); err != nil {
			return sent, err // the leader key is gone, or etcd did not say
		}
		return sent, errTenureGone
	}
	// Renewed only after the proof: a renewal never outlives the leader
	// key by more than one round trip.
	if _, err := t.client.KeepAliveOnce(ctx, t.lease); err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return sent, errTenureGone
		}
		return sent, err
	}
	return sent, nil
}

// proven moves the deadline on after a proof sent at sent.
func (t *tenure) proven(sent time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lastErr = nil
	if d := sent.Add(t.ttl - t.margin); d.After(t.deadline) {
		t.deadline = d
	}
}

// keep proves the term every third of the TTL until ctx, the term's,
// ends, and ends the term with end, with a *lock.LostError wrapping
// lock.ErrLost, when its deadline passes first (lock.ErrDeadlinePassed)
// or its tenure key is gone (lock.ErrKeyDeleted). A proof in flight does
// not hold the deadline back.
func (t *tenure) keep(ctx context.Context, end context.CancelCauseFunc) {
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
	lost := func(cause, detail error) {
		end(&lock.LostError{Kind: lock.ErrLost, Cause: cause, Detail: detail, At: t.clock.Now()})
	}
	next := t.clock.NewTimer(t.every) // claim has just proven the term
	defer next.Stop()
	for {
		left := t.Deadline().Sub(t.clock.Now())
		if left <= 0 {
			t.mu.Lock()
			detail := t.lastErr
			t.mu.Unlock()
			lost(lock.ErrDeadlinePassed, detail)
			return
		}
		dl := t.clock.NewTimer(left)
		select {
		case <-ctx.Done():
			dl.Stop()
			return
		case <-dl.C():
		case r := <-results:
			inflight = false
			switch {
			case r.err == nil:
				t.proven(r.sent)
				next.Reset(max(t.every-t.clock.Since(r.sent), 0))
			case errors.Is(r.err, errTenureGone):
				dl.Stop()
				lost(lock.ErrKeyDeleted, r.err)
				return
			default:
				t.mu.Lock()
				t.lastErr = r.err
				t.mu.Unlock()
				t.log.Warn("could not prove the term; retrying until its deadline", zap.Error(r.err))
				next.Reset(t.retry)
			}
		case <-next.C():
			inflight = true
			go func() {
				sent, err := t.prove(pctx)
				results <- result{sent, err}
			}()
		}
		dl.Stop()
	}
}

// termLost is the term's loss, if it was lost: the tenure's (the cause of
// ctx, the term's) or the lock's; nil if it ended by choice.
func termLost(ctx context.Context, l *lock.Lock) error {
	if cause := context.Cause(ctx); errors.Is(cause, lock.ErrLost) {
		return cause
	}
	if err := l.Err(); errors.Is(err, lock.ErrLost) {
		return err
	}
	return nil
}
