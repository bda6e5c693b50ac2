package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/etcdlock/etcdlock/pkg/election"
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
			Client: r.clients[el.client].cli, Name: "leader",
			ReleaseOnCancel: true, RetryMin: 20 * time.Millisecond, RetryMax: 500 * time.Millisecond,
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
		}, lock.WithOwner(el.name), lock.WithTTL(r.cfg.ttl), lock.WithPrefix(r.prefix), lock.WithCleanupTimeout(time.Second))
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
			r.closeSession(el.rec, now, false)
		}
		cancel()
		wg.Wait()
	}
}

// driveElections resigns the current term every 150–750 ms: on a canceled
// context half the time, with a 1µs–5ms timeout or a normal one otherwise.
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
