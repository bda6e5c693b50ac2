package fencing

import (
	"fmt"
	"sync"
)

// Guard fences in-process resources. For each resource name it keeps the
// highest token that has written (the high-water mark) and runs writes one
// at a time, so the token check and the write cannot be separated by a
// newer writer. The zero Guard is ready to use; a Guard must not be copied
// after first use.
//
// Equal tokens are accepted: one holder may write many times with its
// token. An older token is always rejected.
type Guard struct {
	mu        sync.Mutex
	resources map[string]*fence
}

type fence struct {
	mu   sync.Mutex // held across check and write
	high Token
}

// Do runs write if t is at least the resource's high-water mark, inside the
// resource's critical section, and then raises the mark to t. If t is older,
// write does not run and Do returns a *StaleTokenError. If write returns an
// error, the mark is left unchanged and Do returns that error. An invalid
// token returns an error wrapping ErrInvalidToken.
func (g *Guard) Do(resource string, t Token, write func() error) error {
	if !t.IsValid() {
		return fmt.Errorf("%w: %d", ErrInvalidToken, t)
	}
	f := g.fence(resource)
	f.mu.Lock()
	defer f.mu.Unlock()
	if t < f.high {
		return &StaleTokenError{Resource: resource, Presented: t, Current: f.high}
	}
	if err := write(); err != nil {
		return err
	}
	f.high = t
	return nil
}

// Current returns the resource's high-water mark (0 before any write).
func (g *Guard) Current(resource string) Token {
	f := g.fence(resource)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.high
}

func (g *Guard) fence(resource string) *fence {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.resources == nil {
		g.resources = make(map[string]*fence)
	}
	f, ok := g.resources[resource]
	if !ok {
		f = &fence{}
		g.resources[resource] = f
	}
	return f
}
