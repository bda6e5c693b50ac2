package kubetest

import (
	"context"
	"errors"
	"sync"

	rl "k8s.io/client-go/tools/leaderelection/resourcelock"
)

// ErrRefused is what the calls through a Gate return while it refuses
// them, as a client whose connection is refused or closed.
var ErrRefused = errors.New("kubetest: connection refused")

// Gate stands between an elector and its resource lock, as the network
// and the process between them: while cut, every Get, Create and Update
// blocks until the gate heals or the call's context ends, as over a
// partitioned network or in a frozen process; while refusing, every call
// fails at once with ErrRefused. Identity, Describe and RecordEvent always
// pass. The lock behind it can be replaced (Use) between two electors'
// runs; the gate's state stays.
type Gate struct {
	mu     sync.Mutex
	lock   rl.Interface
	heal   chan struct{} // nil when not cut
	refuse bool
}

var _ rl.Interface = (*Gate)(nil)

// NewGate returns an open gate in front of lock.
func NewGate(lock rl.Interface) *Gate { return &Gate{lock: lock} }

// Use puts lock behind the gate.
func (g *Gate) Use(lock rl.Interface) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lock = lock
}

// Cut makes every call block until Heal.
func (g *Gate) Cut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.heal == nil {
		g.heal = make(chan struct{})
	}
}

// Refuse makes every call fail at once with ErrRefused until Heal.
func (g *Gate) Refuse() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refuse = true
}

// Heal lets the calls through again, the blocked ones too.
func (g *Gate) Heal() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refuse = false
	if g.heal != nil {
		close(g.heal)
		g.heal = nil
	}
}

// pass waits while the gate is cut and returns the lock behind it, or the
// error the call must return.
func (g *Gate) pass(ctx context.Context) (rl.Interface, error) {
	for {
		g.mu.Lock()
		heal, refuse, lock := g.heal, g.refuse, g.lock
		g.mu.Unlock()
		switch {
		case refuse:
			return nil, ErrRefused
		case heal == nil:
			return lock, nil
		}
		select {
		case <-heal:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (g *Gate) inner() rl.Interface {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lock
}

// Get passes Get on.
func (g *Gate) Get(ctx context.Context) (*rl.LeaderElectionRecord, []byte, error) {
	l, err := g.pass(ctx)
	if err != nil {
		return nil, nil, err
	}
	return l.Get(ctx)
}

// Create passes Create on.
func (g *Gate) Create(ctx context.Context, ler rl.LeaderElectionRecord) error {
	l, err := g.pass(ctx)
	if err != nil {
		return err
	}
	return l.Create(ctx, ler)
}

// Update passes Update on.
func (g *Gate) Update(ctx context.Context, ler rl.LeaderElectionRecord) error {
	l, err := g.pass(ctx)
	if err != nil {
		return err
	}
	return l.Update(ctx, ler)
}

// RecordEvent passes RecordEvent on.
func (g *Gate) RecordEvent(event string) { g.inner().RecordEvent(event) }

// Identity passes Identity on.
func (g *Gate) Identity() string { return g.inner().Identity() }

// Describe passes Describe on.
func (g *Gate) Describe() string { return g.inner().Describe() }
