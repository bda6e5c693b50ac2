// Package settings lets the packages built on package lock (election,
// kubelock) read the lock.SessionOptions they take as their own options, as
// etcd's leasing takes concurrency's, without lock exporting a reader:
// every SessionOption is of an unexported type with the method Set.
package settings

import (
	"time"

	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/pkg/clock"
)

// Settings is what SessionOptions set; a field that none of them set is
// its zero value (the reader applies its own defaults).
type Settings struct {
	TTL            time.Duration // lock.WithTTL
	Owner          string        // lock.WithOwner
	Prefix         string        // lock.WithPrefix
	Logger         *zap.Logger   // lock.WithLogger
	SafetyMargin   time.Duration // lock.WithSafetyMargin
	RenewInterval  time.Duration // lock.WithRenewInterval
	Clock          clock.Clock   // lock.WithClock
	CleanupTimeout time.Duration // lock.WithCleanupTimeout
	LockDelay      time.Duration // lock.WithLockDelay
	Metrics        bool          // lock.WithMetrics was given
}

// Setter is implemented by every lock.SessionOption: Set checks the
// option's value, as NewSession does, and sets it in s.
type Setter interface{ Set(s *Settings) error }

// Of returns what opts set, later options over earlier ones. Check opts
// with lock.ValidateSessionOptions first: Of skips a nil option and one
// whose value that check rejects.
func Of[O any](opts []O) Settings {
	var s Settings
	for _, o := range opts {
		if set, ok := any(o).(Setter); ok {
			_ = set.Set(&s) // rejected by lock.ValidateSessionOptions
		}
	}
	return s
}
