package fencing

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// Guard fences in-process resources. For each resource name it keeps the
// newest token it has admitted (the high-water mark) and runs writes one at
// a time, so the token check and the write cannot be separated by a newer
// writer. The zero Guard is ready to use; a Guard must not be copied after
// first use.
//
// Equal tokens are accepted: one holder may write many times with its
// token. An older token is always rejected.
type Guard struct {
	mu        sync.Mutex
	resources map[string]*fence
}

type fence struct {
	mu   sync.Mutex   // held across check and write
	high atomic.Int64 // written under mu; read without it by Current
}

// Do admits t for resource if t is at least the resource's high-water mark,
// raises the mark to t, and then runs write, all inside the resource's
// critical section. If t is older than the mark, write does not run and Do
// returns a *StaleTokenError. An invalid token returns an error wrapping
// ErrInvalidToken, and a nil Guard, an empty resource or a nil write one
// wrapping ErrInvalidArgument; either changes nothing.
//
// The mark is raised when t is admitted, before write runs, and stays
// raised whatever write returns: a write that fails may already have
// changed the resource, and an older token must never write after it. If
// write returns an error, Do returns that error; if it panics, the panic
// goes on after the critical section is released, with the mark raised.
//
// write runs with the resource's critical section held: it may call
// Current, but must not call Do or Reset for the same resource (that call
// would wait for itself forever, as with a sync.Mutex).
func (g *Guard) Do(resource string, t Token, write func() error) error {
	if !t.IsValid() {
		return fmt.Errorf("%w: %d", ErrInvalidToken, t)
	}
	if err := g.check(resource); err != nil {
		return err
	}
	if write == nil {
		return fmt.Errorf("%w: nil write", ErrInvalidArgument)
	}
	f := g.fence(resource, true)
	f.mu.Lock()
	defer f.mu.Unlock()
	if high := Token(f.high.Load()); t < high {
		return &StaleTokenError{Resource: resource, Presented: t, Current: high}
	}
	f.high.Store(int64(t))
	return write()
}

// Current returns the resource's high-water mark: the newest token Do has
// admitted for it (0 before any). It does not wait for a write in
// progress, so a write may call it for its own resource; it then returns
// the token that write was admitted with.
func (g *Guard) Current(resource string) Token {
	if g == nil {
		return 0
	}
	f := g.fence(resource, false)
	if f == nil {
		return 0
	}
	return Token(f.high.Load())
}

// Reset sets the resource's high-water mark to t (0 forgets it), waiting
// for a write in progress to finish, and returns the mark it replaced. It
// is the operator's way out when a token that no lock could have issued
// (a typing error, a forged header) was admitted and now refuses every real
// token: Reset to the newest token the lock has really issued, or 0. A
// negative t returns an error wrapping ErrInvalidToken and changes nothing.
func (g *Guard) Reset(resource string, t Token) (Token, error) {
	if t < 0 {
		return 0, fmt.Errorf("%w: %d", ErrInvalidToken, t)
	}
	if err := g.check(resource); err != nil {
		return 0, err
	}
	f := g.fence(resource, true)
	f.mu.Lock()
	defer f.mu.Unlock()
	return Token(f.high.Swap(int64(t))), nil
}

// check refuses a nil Guard and an empty resource name.
func (g *Guard) check(resource string) error {
	switch {
	case g == nil:
		return fmt.Errorf("%w: nil Guard", ErrInvalidArgument)
	case resource == "":
		return fmt.Errorf("%w: empty resource name", ErrInvalidArgument)
	}
	return nil
}

// fence returns the resource's fence, creating it if create is set;
// otherwise it returns nil for a resource never admitted.
func (g *Guard) fence(resource string, create bool) *fence {
	g.mu.Lock()
	defer g.mu.Unlock()
	f, ok := g.resources[resource]
	if !ok && create {
		if g.resources == nil {
			g.resources = make(map[string]*fence)
		}
		f = &fence{}
		g.resources[resource] = f
	}
	return f
}
