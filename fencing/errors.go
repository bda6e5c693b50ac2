package fencing

import (
	"errors"
	"fmt"
)

// ErrInvalidArgument is wrapped by the errors of Guard's methods called
// with a nil Guard, an empty resource name or a nil write: nothing is
// admitted or changed.
var ErrInvalidArgument = errors.New("fencing: invalid argument")

// ErrStaleToken is wrapped by every error that rejects a write because a
// newer token has been seen. The concrete error is a *StaleTokenError.
var ErrStaleToken = errors.New("fencing: stale token")

// StaleTokenError reports a rejected write: Presented is older than Current,
// the newest token the resource has accepted (0 if unknown).
type StaleTokenError struct {
	Resource  string
	Presented Token
	Current   Token
}

func (e *StaleTokenError) Error() string {
	if e.Current == 0 {
		return fmt.Sprintf("fencing: stale token %s for %q", e.Presented, e.Resource)
	}
	return fmt.Sprintf("fencing: stale token %s for %q (current %s)", e.Presented, e.Resource, e.Current)
}

// Unwrap returns ErrStaleToken.
func (e *StaleTokenError) Unwrap() error { return ErrStaleToken }
