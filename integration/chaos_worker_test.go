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
	"github.com/etcdlock/etcdlock/pkg/holders"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// work is one worker: sessions, acquisitions, fenced writes, releases.
func (c *chaosRun) work(ctx context.Context, id int, cli *clientv3.Client, pause <-chan time.Duration, cut func(bool)) {
	rng := rand.New(rand.NewPCG(c.cfg.seed, uint64(id)))
	for ctx.Err() == nil {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		opts := []lock.SessionOption{lock.WithTTL(c.cfg.ttl), lock.WithOwner(fmt.Sprintf("w%d", id)),
			lock.WithPrefix(c.cfg.prefix), lock.WithCleanupTimeout(time.Second)}
		if c.cfg.kind == kindDelay && c.cfg.control != controlNoDelay {
			opts = append(opts, lock.WithLockDelay(chaosLockDelay))
		}
		s, err := lock.NewSession(sctx, cli, opts...)
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
	names := []string{c.cfg.names[rng.IntN(len(c.cfg.names))]}
	var opts []lock.AcquireOption
	shared := false
	switch c.cfg.kind {
	case kindSemaphore:
		opts = append(opts, lock.WithLimit(c.cfg.limit))
	case kindRWLock:
		if shared = rng.IntN(2) == 0; shared {
			opts = append(opts, lock.WithShared())
		}
	case kindMulti:
		perm := rng.Perm(len(c.cfg.names))
		names = names[:0]
		size := 1 + rng.IntN(len(perm))
		if c.cfg.control == controlSerialSet {
			// Every name, in one order (the control is about atomicity,
			// not deadlock): every set has names whose tokens differ.
			size, perm = len(perm), perm[:0]
			for i := range c.cfg.names {
				perm = append(perm, i)
			}
		}
		for _, i := range perm[:size] {
			names = append(names, c.cfg.names[i])
		}
	}
	wait := 3 * time.Second
	if c.cfg.kind == kindDelay {
		wait += 2 * chaosLockDelay // a lost holder's successor waits out its lease, then the delay
	}
	actx, cancel := context.WithTimeout(ctx, wait)
	call := c.now()
	var l *lock.Lock
	var err error
	var serial []*lock.Lock // controlSerialSet's locks, one per name
	switch {
	case c.cfg.control == controlSerialSet:
		for _, name := range names {
			var one *lock.Lock
			if one, err = s.Acquire(actx, name); err != nil {
				break
			}
			serial = append(serial, one)
		}
		if err != nil {
			for _, one := range serial {
				_ = one.Release(context.Background())
			}
		} else {
			l = serial[0]
			defer func() {
				for _, one := range serial[1:] {
					_ = one.Release(context.Background())
				}
			}()
		}
	case c.cfg.kind == kindMulti:
		l, err = s.AcquireAll(actx, names)
	default:
		l, err = s.Acquire(actx, names[0], opts...)
	}
	cancel()
	if err != nil {
		time.Sleep(50 * time.Millisecond)
		return
	}
	// One term per name held, all with the lock's token.
	start := c.now()
	var terms []*term
	for i, name := range names {
		key := l.Key()
		if i < len(l.Keys()) {
			key = l.Keys()[i]
		} else if i < len(serial) {
			key = serial[i].Key()
		}
		tm := &term{name: name, part: name, key: key, shared: shared, slot: l.Slot(), worker: id, token: l.Token(), start: start}
		if tm.slot >= 0 {
			tm.part, tm.key = fmt.Sprintf("%s#%d", name, tm.slot), l.Key()
		}
		if !tm.shared {
			// Readers are not in the model: they exclude only writers
			// (checked on the terms) and make no fenced writes.
			c.record(porcupine.Operation{Input: lockInput{tm.part, opAcquire, l.Token()}, Call: int64(call), Return: int64(tm.start)})
		}
		terms = append(terms, tm)
	}
	c.mu.Lock()
	c.terms = append(c.terms, terms...)
	c.mu.Unlock()

	if shared && c.cfg.control != controlNone {
		// A control's pause must hit a holder that writes: a reader's
		// stale belief harms no fenced resource.
		pause = nil
	}
	writeAll := func() {
		for _, tm := range terms {
			c.writes(ctx, tm, l, cli)
		}
	}
	for n := 1 + rng.IntN(4); n > 0 && l.Err() == nil; n-- {
		writeAll()
		select {
		case d := <-pause:
			// The process stops: nothing it sends or receives moves, and
			// its code does not run. It resumes unaware, and writes.
			for _, tm := range terms {
				tm.partitionedAt = c.now()
			}
			cut(true)
			time.Sleep(d)
			cut(false)
			for _, tm := range terms {
				c.endTerm(tm, l, true)
			}
			writeAll() // stale: a newer holder may exist
			c.release(l, terms)
			return
		case <-time.After(time.Duration(20+rng.IntN(100)) * time.Millisecond):
		case <-l.Context().Done():
		}
	}
	for _, tm := range terms {
		c.endTerm(tm, l, false)
	}
	c.release(l, terms)
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
		_, err = etcdfence.Commit(wctx, cli, tm.key, tok, clientv3.OpPut(strings.TrimSuffix(c.cfg.prefix, "/")+"-data/"+name, tok.String()))
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

// release releases l, whose terms are terms (one per name).
func (c *chaosRun) release(l *lock.Lock, terms []*term) {
	rctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c.mu.Lock()
	for _, tm := range terms {
		tm.releaseCall = c.now()
	}
	c.mu.Unlock()
	tm, name := terms[0], terms[0].name
	if c.cfg.control != controlReleaseByName || c.cfg.kind != kindMutex {
		_ = l.Release(rctx)
		return
	}
	// The broken release: delete whatever key holds the name.
	_ = l.Release(rctx) // ends the session's claim; its compare-and-delete is harmless
	st, err := holders.Inspect(rctx, c.obs, c.cfg.prefix, name)
	if err != nil || st.Holder == nil {
		return // the control then goes undetected, which the run reports
	}
	del, err := c.obs.Delete(rctx, st.Holder.Key, clientv3.WithPrevKV())
	if err == nil && len(del.PrevKvs) == 1 && fencing.Token(del.PrevKvs[0].CreateRevision) != tm.token {
		c.mu.Lock()
		c.badReleases++
		c.mu.Unlock()
	}
}
