package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/fencing/etcdfence"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// work is one worker: sessions, acquisitions, fenced writes, releases.
func (c *chaosRun) work(ctx context.Context, id int, cli *clientv3.Client, pause <-chan time.Duration, cut func(bool)) {
	rng := rand.New(rand.NewPCG(c.cfg.seed, uint64(id)))
	for ctx.Err() == nil {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		s, err := lock.NewSession(sctx, cli, lock.WithTTL(c.cfg.ttl), lock.WithOwner(fmt.Sprintf("w%d", id)),
			lock.WithPrefix(c.cfg.prefix), lock.WithCleanupTimeout(time.Second))
		cancel()
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for ctx.Err() == nil && s.Err() == nil {
			c.hold(ctx, id, rng, s, cli, pause, cut)
		}
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = s.Close(cctx)
		cancel()
	}
}

func (c *chaosRun) hold(ctx context.Context, id int, rng *rand.Rand, s *lock.Session, cli *clientv3.Client, pause <-chan time.Duration, cut func(bool)) {
	name := c.cfg.names[rng.IntN(len(c.cfg.names))]
	var opts []lock.Option
	switch c.cfg.kind {
	case kindSemaphore:
		opts = append(opts, lock.WithLimit(c.cfg.limit))
	case kindRWLock:
		if rng.IntN(2) == 0 {
			opts = append(opts, lock.WithShared())
		}
	}
	actx, cancel := context.WithTimeout(ctx, 3*time.Second)
	call := c.now()
	l, err := s.Acquire(actx, name, opts...)
	cancel()
	if err != nil {
		time.Sleep(50 * time.Millisecond)
		return
	}
	tm := &term{name: name, part: name, shared: l.Shared(), slot: l.Slot(), worker: id, token: l.Token(), start: c.now()}
	if tm.slot >= 0 {
		tm.part = fmt.Sprintf("%s#%d", name, tm.slot)
	}
	if !tm.shared {
		// Readers are not in the model: they exclude only writers (checked
		// on the terms) and make no fenced writes.
		c.record(porcupine.Operation{Input: lockInput{tm.part, opAcquire, l.Token()}, Call: int64(call), Return: int64(tm.start)})
	}
	c.mu.Lock()
	c.terms = append(c.terms, tm)
	c.mu.Unlock()

	if tm.shared && c.cfg.control != controlNone {
		// A control's pause must hit a holder that writes: a reader's
		// stale belief harms no fenced resource.
		pause = nil
	}
	for n := 1 + rng.IntN(4); n > 0 && l.State() == lock.StateActive; n-- {
		c.writes(ctx, tm, l, cli)
		select {
		case d := <-pause:
			// The process stops: nothing it sends or receives moves, and
			// its code does not run. It resumes unaware, and writes.
			tm.partitionedAt = c.now()
			cut(true)
			time.Sleep(d)
			cut(false)
			c.endTerm(tm, l, true)
			c.writes(ctx, tm, l, cli) // stale: a newer holder may exist
			c.release(name, l, tm)
			return
		case <-time.After(time.Duration(20+rng.IntN(100)) * time.Millisecond):
		case <-l.Context().Done():
		}
	}
	c.endTerm(tm, l, false)
	c.release(name, l, tm)
}

// endTerm fixes the end of the holder's believed ACTIVE interval.
func (c *chaosRun) endTerm(tm *term, l *lock.Lock, resumed bool) {
	end := c.now()
	var lost *lock.LostError
	if errors.As(l.Err(), &lost) {
		tm.lostAt = lost.At.Sub(c.t0)
		if errors.Is(lost, lock.ErrDeadlinePassed) && c.cfg.control != controlNoDeadline {
			end = min(end, tm.lostAt)
		}
	}
	c.mu.Lock()
	tm.end = end
	c.mu.Unlock()
}

// writes makes one write to each fenced resource with l's token: one
// resource per name, or per slot of a semaphore. Readers do not write.
func (c *chaosRun) writes(ctx context.Context, tm *term, l *lock.Lock, cli *clientv3.Client) {
	if tm.shared {
		return
	}
	name, tok := tm.part, l.Token()
	call := c.now()
	var err error
	if c.cfg.control == controlUnfenced {
		c.mu.Lock()
		c.applied[name] = append(c.applied[name], tok)
		c.mu.Unlock()
	} else {
		err = c.guard.Do(name, tok, func() error {
			c.mu.Lock()
			c.applied[name] = append(c.applied[name], tok)
			c.mu.Unlock()
			return nil
		})
	}
	c.record(porcupine.Operation{Input: lockInput{name, opRegister, tok}, Output: err == nil, Call: int64(call), Return: int64(c.now())})

	wctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	call = c.now()
	if c.cfg.control == controlUnfenced {
		_, err = cli.Put(wctx, strings.TrimSuffix(c.cfg.prefix, "/")+"-data/"+name, tok.String())
	} else {
		_, err = etcdfence.Commit(wctx, cli, l.Key(), tok, clientv3.OpPut(strings.TrimSuffix(c.cfg.prefix, "/")+"-data/"+name, tok.String()))
	}
	var stale *fencing.StaleTokenError
	switch {
	case err == nil:
		c.record(porcupine.Operation{Input: lockInput{name, opFencedWrite, tok}, Output: true, Call: int64(call), Return: int64(c.now())})
	case errors.As(err, &stale):
		c.record(porcupine.Operation{Input: lockInput{name, opFencedWrite, tok}, Output: false, Call: int64(call), Return: int64(c.now())})
	default: // outcome unknown: it may or may not have happened, and has no effect on the model
	}
}

func (c *chaosRun) release(name string, l *lock.Lock, tm *term) {
	rctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c.mu.Lock()
	tm.releaseCall = c.now()
	c.mu.Unlock()
	if c.cfg.control != controlReleaseByName || c.cfg.kind != kindMutex {
		_ = l.Release(rctx)
		return
	}
	// The broken release: delete whatever key holds the name.
	_ = l.Release(rctx) // ends the session's claim; its compare-and-delete is harmless
	pfx, err := lock.NamePrefix(c.cfg.prefix, name)
	if err != nil {
		return // the control then goes undetected, which the run reports
	}
	get, err := c.obs.Get(rctx, pfx, clientv3.WithFirstCreate()...)
	if err != nil || len(get.Kvs) == 0 {
		return
	}
	del, err := c.obs.Delete(rctx, string(get.Kvs[0].Key), clientv3.WithPrevKV())
	if err == nil && len(del.PrevKvs) == 1 && fencing.Token(del.PrevKvs[0].CreateRevision) != tm.token {
		c.mu.Lock()
		c.badReleases++
		c.mu.Unlock()
	}
}
