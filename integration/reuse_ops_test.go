package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/pkg/election"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// reuseElector is one candidate of the run's election.
type reuseElector struct {
	e      *election.Elector
	name   string
	client int
	rec    *sessionRec // the elector's life; "closed" when it is stopped
	cur    *grant      // the term in progress (under reuseRun.mu)
}

// startElections runs the electors and a driver that resigns terms, often
// on expired contexts, so that the next term follows on the same session.
// The returned function stops the driver and then the electors
// (ReleaseOnCancel resigns and closes their sessions) and waits for them.
func (r *reuseRun) startElections(work context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var els []*reuseElector
	for i := range r.cfg.electors {
		el := &reuseElector{name: fmt.Sprintf("e%d", i), client: (i * 3) % len(r.clients)}
		el.rec = &sessionRec{worker: el.name, closed: -1}
		r.mu.Lock()
		r.sessions = append(r.sessions, el.rec)
		r.mu.Unlock()
		e, err := election.New(election.Config{
			Client: r.clients[el.client].cli, Name: "leader", Identity: el.name, TTL: r.cfg.ttl, Prefix: r.prefix,
			ReleaseOnCancel: true, RetryMin: 20 * time.Millisecond, RetryMax: 500 * time.Millisecond,
			SessionOptions: []lock.Option{lock.WithCleanupTimeout(time.Second)},
			Callbacks: election.Callbacks{OnStartedLeading: func(ctx context.Context, term election.Term) {
				g := r.granted("term", el.name, el.client, el.rec, term.Name, term.Key, term.Token, r.now(), -1)
				r.mu.Lock()
				el.cur = g
				r.mu.Unlock()
				<-ctx.Done()
				r.ended(g, r.now(), context.Cause(ctx), true)
				r.mu.Lock()
				el.cur = nil
				r.mu.Unlock()
			}},
		})
		if err != nil {
			r.t.Fatalf("election.New: %v", err)
		}
		el.e = e
		els = append(els, el)
		wg.Add(1)
		go func() { defer wg.Done(); _ = e.Run(ctx) }()
	}
	driven := make(chan struct{})
	go func() { defer close(driven); r.driveElections(work, els) }()
	return func() {
		<-driven
		now := r.now()
		for _, el := range els {
			r.closeSession(el.rec, now)
		}
		cancel()
		wg.Wait()
	}
}

func (r *reuseRun) driveElections(ctx context.Context, els []*reuseElector) {
	if len(els) == 0 {
		return
	}
	rng := rand.New(rand.NewPCG(r.cfg.seed, 0xe1ec))
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(150+rng.IntN(600)) * time.Millisecond):
		}
		var el *reuseElector
		r.mu.Lock()
		for _, e := range els {
			if e.cur != nil {
				el = e
			}
		}
		var g *grant
		if el != nil {
			g = el.cur
		}
		r.mu.Unlock()
		if g == nil {
			continue
		}
		if t := el.e.Term(); t == nil || t.Token != g.real {
			continue
		}
		var rctx context.Context
		var cancel context.CancelFunc
		switch k := rng.IntN(10); {
		case k < 5:
			rctx, cancel = context.WithCancel(context.Background())
			cancel()
		case k < 7:
			rctx, cancel = context.WithTimeout(context.Background(), time.Duration(1+rng.IntN(5000))*time.Microsecond)
		default:
			rctx, cancel = context.WithTimeout(context.Background(), 2*time.Second)
		}
		r.releasing(g, r.now())
		err := el.e.Resign(rctx)
		cancel()
		r.count("resigns")
		if err != nil {
			r.count("resigns that failed")
		}
	}
}

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
		case k < 45:
			r.operatorDelete(ctx, rng, false)
		case k < 60:
			r.operatorDelete(ctx, rng, true)
		case k < 72:
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
// lock.Break (which also revokes the holder's lease).
func (r *reuseRun) operatorDelete(ctx context.Context, rng *rand.Rand, brk bool) {
	now := r.now()
	r.mu.Lock()
	var cands, control []*grant
	for _, g := range r.grants {
		if g.end >= 0 || now-g.start < 250*time.Millisecond {
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
		h, err := lock.Break(octx, r.obs, g.name, g.real, lock.WithPrefix(r.prefix))
		if h.Key == "" {
			return // not the holder any more: nothing was deleted
		}
		act.createRev, act.lease = int64(h.Token), h.LeaseID
		_ = err // key deleted, revoke failed: the lease expires on its own
	} else {
		resp, err := r.obs.Delete(octx, g.key, clientv3.WithPrevKV())
		switch {
		case err != nil && !errors.Is(err, context.Canceled):
			act.createRev = int64(g.real) // it may have happened
		case err != nil || len(resp.PrevKvs) == 0:
			return
		default:
			act.createRev = resp.PrevKvs[0].CreateRevision
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
