package lock

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/etcdlock/etcdlock/pkg/internal/watchmux"
)

// waitTurn waits until no key under pfx that l must wait for is older than
// l's key: any key for a writer, a writer's key for a reader (WithShared).
// pred, if set, is the newest such key as of the acquiring write;
// otherwise the wait starts with a read.
//
// Each predecessor is watched from the revision etcd creates the watch at
// (see watchmux.Mux.WatchFromNow), then read again: if it is still there, the
// watch will see it go. Every read checks, in one linearizable request,
// that l's key still exists and which older key is the newest.
//
// The reads are linearizable, not serializable, although a serializable
// read would be safe here (older keys only ever disappear) and faster
// under write load: etcd can panic serving a serializable read on a member
// that is stopping (etcd-io/etcd#17223), which this project's fault suite
// hit with embedded members.
//
// own is l's key under pfx: l.key, or for AcquireAll the key of one of
// its names.
func (s *Session) waitTurn(ctx context.Context, l *Lock, own, pfx, pred string) error {
	t := &turnWait{s: s, l: l, own: own, pfx: pfx}
	defer func() { s.mux.Remove(t.w) }()
	st := turnBehind
	if pred == "" {
		st = turnUnknown
	}
	for {
		var err error
		switch st {
		case turnUnknown:
			st, pred, err = t.read(ctx)
		case turnMine:
			return nil
		case turnBehind:
			if pred != t.watching {
				err = t.watch(ctx, pred) // a new predecessor: watch it, then read again
			} else {
				err = t.wait(ctx) // deleted, or the watch broke: either way read again
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
	s        *Session
	l        *Lock
	own, pfx string

	w        *watchmux.Watch
	watching string     // the key w watches, "" if none
	gone     chan error // receives w's firing: nil, or why etcd refused the watch
}

// read reads l's turn, in one linearizable request that also checks that
// own still exists: turnMine, or turnBehind and the predecessor.
func (t *turnWait) read(ctx context.Context) (turn, string, error) {
	l := t.l
	if l.Shared() {
		p, err := t.s.olderWriter(ctx, l, t.pfx)
		if err != nil || p == "" {
			return turnMine, "", err
		}
		return turnBehind, p, nil
	}
	resp, err := t.s.waitRead(ctx, l,
		clientv3.OpGet(t.own),
		clientv3.OpGet(t.pfx, append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(l.rev-1))...),
	)
	if err != nil {
		return turnUnknown, "", err
	}
	if mine := resp.Responses[0].GetResponseRange().Kvs; len(mine) == 0 || mine[0].CreateRevision != l.rev {
		return turnUnknown, "", ErrKeyDeleted
	}
	preds := resp.Responses[1].GetResponseRange().Kvs
	if len(preds) == 0 {
		return turnMine, "", nil
	}
	if err := behindSemaphore(l, preds[0]); err != nil {
		return turnUnknown, "", err
	}
	return turnBehind, string(preds[0].Key), nil
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

// wait waits until the watched predecessor is deleted or its watch breaks.
func (t *turnWait) wait(ctx context.Context) error {
	select {
	case err := <-t.gone:
		t.watching = ""
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
