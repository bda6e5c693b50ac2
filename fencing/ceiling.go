package fencing

import (
	"context"
	"errors"
)

// Ceiling reports a token at least as new as every token issued so far:
// for etcdlock tokens, the current revision of the lock's etcd cluster
// (etcdfence.Ceiling). A guard that admits tokens claimed by other parties
// refuses a token above the ceiling, which no lock could have issued, so a
// forged or mistyped huge token cannot poison a resource's mark.
type Ceiling func(ctx context.Context) (Token, error)

// ErrNotIssued is wrapped by the error that refuses a token above the
// ceiling: no lock could have issued it yet.
var ErrNotIssued = errors.New("fencing: token not issued")
