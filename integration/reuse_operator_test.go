package integration

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/holders"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// operate is the operator and the network: it deletes and breaks held
// keys, and partitions, delays and reconnects the proxied clients.
func (r *reuseRun) operate(ctx context.Context) {
	rng := rand.New(rand.NewPCG(r.cfg.seed, 0x09e7))
	var faults sync.WaitGroup
	defer faults.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(80+rng.IntN(200)) * time.Millisecond):
		}
		switch k := rng.IntN(100); {
		case k < 50 || r.cfg.control == reuseIgnoreLost && k < 75:
			r.operatorDelete(ctx, rng, false)
		case k < 65:
			r.operatorDelete(ctx, rng, true)
		case k < 71: // a fault every 2 s or so: they make the client's keys off limits
			c := r.clients[len(r.clients)-1-rng.IntN(2)]
			now := r.now()
			c.mu.Lock()
			ok := c.p != nil && now >= c.quiet
			kind := rng.IntN(27)
			d := time.Duration(300+rng.IntN(900)) * time.Millisecond
			lat := time.Duration(300+rng.IntN(200)) * time.Millisecond
			if ok {
				// The operator leaves the client's keys alone during the
				// fault and while it reconnects.
				c.quiet = now + d + 1500*time.Millisecond
			}
			c.mu.Unlock()
			if !ok {
				continue
			}
			faults.Add(1)
			go func() { defer faults.Done(); r.fault(c, kind, d, lat) }()
		}
	}
}

// fault cuts (pauses both directions), delays or reconnects c's proxy.
func (r *reuseRun) fault(c *reuseClient, kind int, d, lat time.Duration) {
	c.mu.Lock()
	p := c.p
	c.mu.Unlock()
	switch {
	case kind < 12:
		// Nothing moves either way, and nothing is lost: TCP delivers
		// what waited once the partition heals.
		r.count("faults: partition")
		p.PauseTx()
		p.PauseRx()
		time.Sleep(d)
		p.UnpauseTx()
		p.UnpauseRx()
	case kind < 22:
		r.count("faults: delay")
		p.DelayTx(lat, 20*time.Millisecond)
		p.DelayRx(lat, 20*time.Millisecond)
		time.Sleep(d)
		p.UndelayTx()
		p.UndelayRx()
	default:
		r.count("faults: reconnect")
		c.mu.Lock()
		c.p = etcdtest.RestartProxy(r.t, c.p)
		c.mu.Unlock()
	}
}

// operatorDelete deletes the key of a lock held for a while, raw or with
// holders.Force (which also revokes the holder's lease).
func (r *reuseRun) operatorDelete(ctx context.Context, rng *rand.Rand, brk bool) {
	now := r.now()
	r.mu.Lock()
	var cands, control []*grant
	for _, g := range r.grants {
		if g.end >= 0 || now-g.start < 150*time.Millisecond {
			continue
		}
		c := r.clients[g.client]
		c.mu.Lock()
		quiet := now < c.quiet
		c.mu.Unlock()
		if quiet {
			continue
		}
		cands = append(cands, g)
		if r.cfg.control == reuseIgnoreLost && g.worker == "w0" && g.due-now > noticeBound+500*time.Millisecond {
			control = append(control, g)
		}
	}
	r.mu.Unlock()
	if len(control) > 0 {
		cands, brk = control, false
	}
	if len(cands) == 0 {
		return
	}
	// Half the time the operator breaks the lock its holder means to keep
	// longest: the hazard is a holder that goes on believing.
	g := cands[rng.IntN(len(cands))]
	if rng.IntN(2) == 0 {
		for _, c := range cands {
			if c.kind != "term" && (g.kind == "term" || c.due > g.due) {
				g = c
			}
		}
	}
	c := r.clients[g.client]
	c.mu.Lock()
	// No fault may start on the holder's client before it had time to notice.
	c.quiet = max(c.quiet, now+noticeBound)
	c.mu.Unlock()
	octx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	call := r.now()
	act := opAction{kind: "delete", key: g.key, call: call}
	if brk {
		act.kind = "break"
		h, err := holders.Force(octx, r.obs, r.prefix, g.name, g.real)
		switch {
		case errors.Is(err, lock.ErrNotHeld) || errors.Is(err, lock.ErrNotOwner):
			// Not the holder any more, or its key went before the delete:
			// nothing was deleted (Force returns the holder it found even
			// then).
			return
		case h.Key != "":
			// Deleted (a failed revoke only leaves the lease to expire).
			act.createRev, act.lease, act.deleted = int64(h.Token), h.LeaseID, true
		case err == nil:
			return
		default:
			// Its reply was lost or its context ended (the run's end):
			// etcd may still have applied the delete.
			act.createRev, act.lease = int64(g.real), g.lease
		}
	} else {
		resp, err := r.obs.Delete(octx, g.key, clientv3.WithPrevKV())
		switch {
		case err != nil:
			// Even canceled (the run's end), the delete may have been
			// applied: a canceled request is not a refused one.
			act.createRev = int64(g.real)
		case len(resp.PrevKvs) == 0:
			return
		default:
			act.createRev, act.deleted = resp.PrevKvs[0].CreateRevision, true
		}
	}
	act.ret = r.now()
	r.mu.Lock()
	r.actions = append(r.actions, act)
	r.stats["operator: "+act.kind]++
	if g.worker == "w0" && r.cfg.control == reuseIgnoreLost {
		r.controlled = true
	}
	r.mu.Unlock()
}
