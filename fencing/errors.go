package fencing

import (
	"errors"
	"fmt"
)

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
