package lock

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/etcdlock/etcdlock/pkg/internal/backoff"
	"github.com/etcdlock/etcdlock/pkg/internal/watchmux"
)

// waitTurn waits until no key that l must wait for is older than l's:
// pred, if set, is the newest such key as of the acquiring write (else the
// wait starts with a read), and read reads which is the newest now ("" for
// none), checking that l's key still exists (olderKey, or a reader's
// olderWriter). It watches each predecessor, then reads again: see
// "Acquire and the watch path" in DESIGN.md.
func (l *Lock) waitTurn(ctx context.Context, pred string, read func(context.Context) (string, error)) error {
	s := l.s
	t := &turnWait{s: s, l: l}
	defer func() { s.mux.Remove(t.w) }()
	st := turnBehind
	if pred == "" {
		st = turnUnknown
	}
	for {
		var err error
		switch st {
		case turnUnknown:
			if pred, err = read(ctx); pred == "" {
				st = turnMine
			} else {
				st = turnBehind
			}
		case turnMine:
			return nil
		case turnBehind:
			if pred != t.watching {
				err = t.watch(ctx, pred) // a new predecessor: watch it, then read again
				st = turnUnknown
				break
			}
			// Wait until the predecessor is deleted or its watch breaks:
			// either way, read again.
			select {
			case err = <-t.gone:
				t.watching = ""
				err = refused(err)
			case <-l.ctx.Done():
				err = context.Cause(l.ctx)
			case <-ctx.Done():
				err = ctx.Err()
			}
			st = turnUnknown
		}
		if err != nil {
			return err
		}
	}
}

// turn is what a waiter knows of its turn.
type turn int

const (
	turnUnknown turn = iota // read to find out
	turnMine                // no older key l must wait for
	turnBehind              // an older key l must wait for: its predecessor
)

// turnWait is one waiter's wait for its turn (waitTurn).
type turnWait struct {
	s *Session
	l *Lock

	w        *watchmux.Watch
	watching string     // the key w watches, "" if none
	gone     chan error // receives w's firing: nil, or why etcd refused the watch
}

// olderKey reads, in one linearizable request (waitRead) that also checks
// that own, l's key under pfx, still exists, the newest key under pfx
// older than l's: its predecessor, "" if there is none.
func (l *Lock) olderKey(ctx context.Context, own, pfx string) (string, error) {
	resp, err := l.waitRead(ctx, clientv3.OpGet(own), clientv3.OpGet(pfx, append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(l.rev-1))...))
	if err != nil {
		return "", err
	}
	if mine := resp.Responses[0].GetResponseRange().Kvs; len(mine) == 0 || mine[0].CreateRevision != l.rev {
		return "", ErrKeyDeleted
	}
	preds := resp.Responses[1].GetResponseRange().Kvs
	if len(preds) == 0 {
		return "", nil
	}
	if err := behindSemaphore(l, preds[0]); err != nil {
		return "", err
	}
	return string(preds[0].Key), nil
}

// watch replaces the watch with one of pred, from the revision etcd
// creates it at, and waits until etcd created it.
func (t *turnWait) watch(ctx context.Context, pred string) error {
	t.s.mux.Remove(t.w)
	if ce := t.s.log.Check(zapcore.DebugLevel, "waiting"); ce != nil {
		ce.Write(zap.String("name", t.l.name), zap.String("predecessor", pred))
	}
	gone, created := make(chan error, 1), make(chan struct{}, 1)
	t.w = t.s.mux.WatchFromNow(pred, func(err error) { gone <- err }, func() {
		select {
		case created <- struct{}{}:
		default:
		}
	})
	t.watching, t.gone = pred, gone
	select {
	case <-created:
		return nil
	case err := <-gone:
		t.watching = "" // gone already, or the watch broke
		return refused(err)
	case <-t.l.ctx.Done():
		return context.Cause(t.l.ctx)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// refused is the error of a watch's firing: nil for a deletion or a broken
// watch, else etcd's refusal as ErrWatchRefused.
func refused(err error) error {
	if err != nil {
		return fmt.Errorf("%w: %w", ErrWatchRefused, err)
	}
	return nil
}

// readTryTimeout bounds one try of a read that is retried (a waiter's,
// Follow's): a member that accepts the connection but does not answer
// (frozen, cut off from its leader) would otherwise hold the read for as
// long as it stays so.
const readTryTimeout = 5 * time.Second

// waitRead runs a waiter's read-only transaction of ops, for l. A read
// changes nothing, so it is safe to repeat whatever became of an earlier
// try: while etcd is unreachable, has no leader or sheds load (gRPC codes
// Unavailable — a broken connection, "leader changed", "request timed
// out" — and ResourceExhausted, "too many requests"), or does not answer a
// try within its bound (firstTryTimeout, doubling up to readTryTimeout;
// unbounded with one endpoint), it is retried with jittered backoff up to
// 1 s until it succeeds, ctx ends or l ends.
// clientv3 retries a Get so, but never a Txn, and without this a
// connection that breaks under a waiter would end its Acquire with an
// error. ctx should be bound to l (Lock.bind), so that a try waiting for a
// connection ends with the session.
func (l *Lock) waitRead(ctx context.Context, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	s := l.s
	// Jittered, so that the waiters an election interrupted do not retry
	// in step.
	retry := backoff.Backoff{Min: 25 * time.Millisecond, Max: time.Second, Jitter: true}
	bound := firstTryTimeout
	// With one endpoint another try would go to the same member: the try
	// has until ctx ends.
	bounded := len(s.client.Endpoints()) > 1
	for {
		// One try gets its bound, the next twice as long up to
		// readTryTimeout, and goes to the client's next endpoint.
		tctx, cancel := ctx, context.CancelFunc(func() {})
		if bounded {
			tctx, cancel = context.WithTimeout(ctx, bound)
		}
		resp, err := s.client.Txn(tctx).Then(ops...).Commit()
		cancel()
		if err == nil || ctx.Err() != nil || !retryableRead(err) && !errors.Is(err, context.DeadlineExceeded) {
			return resp, err
		}
		if errors.Is(err, context.DeadlineExceeded) {
			bound = min(2*bound, readTryTimeout)
		}
		d := retry.Next()
		s.log.Debug("waiting: read failed, retrying", zap.String("name", l.name), zap.Duration("in", d), zap.Error(err))
		if err := l.pause(ctx, d); err != nil {
			return nil, err
		}
	}
}

// pause waits d on the real clock (it paces requests to etcd) for an
// acquisition of l running on ctx. It returns early with l's cause once l
// has ended, or with ctx.Err() once ctx has.
func (l *Lock) pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-l.ctx.Done():
		return context.Cause(l.ctx)
	case <-ctx.Done():
		return ctx.Err()
	}
}
