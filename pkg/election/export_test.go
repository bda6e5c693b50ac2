package election

import (
	"context"

	"github.com/etcdlock/etcdlock/pkg/lock"
)

// WithoutHandoverDelay returns c for an elector whose successors do not
// wait after an unclean end and that does not confirm its key: the
// negative control of the overlap check.
func WithoutHandoverDelay(c Config) Config {
	c.noHandoverDelay = true
	return c
}

// WithConfirm returns c for an elector that confirms its leader key with
// confirm instead of lock.Lock.Confirm.
func WithConfirm(c Config, confirm func(context.Context, *lock.Lock) error) Config {
	c.confirm = confirm
	return c
}
