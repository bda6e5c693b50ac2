package kubelock

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/pkg/internal/settings"
	"github.com/etcdlock/etcdlock/pkg/kuberecord"
	"github.com/etcdlock/etcdlock/pkg/lease"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// Defaults.
const (
	// DefaultPrefix is the key prefix of the records (lock.WithPrefix sets
	// another): a record's key is the prefix followed by the election's
	// name, and the key of its term count that key followed by "\x00terms".
	// It is apart from package lock's DefaultPrefix, so that `etcdlock list`
	// does not take records for locks.
	DefaultPrefix = kuberecord.DefaultPrefix
	// DefaultTTL is the etcd lease TTL of a term (lock.WithTTL sets
	// another). Each successful Update
	// renews it, so it must comfortably exceed the elector's RetryPeriod
	// (DefaultTimings: 2 s): three renewals fit in it.
	DefaultTTL = 6 * time.Second
	// MaxNameBytes bounds the length of an election's name and of an
	// identity (New): a request carries the record's key three times and
	// the identity twice, and etcd refuses requests over 1.5 MiB (its
	// default --max-request-bytes), which would fail every Create.
	MaxNameBytes = 64 << 10
	// DefaultCleanupTimeout bounds a lease revoke the lock runs on its own
	// context after a term ends.
	DefaultCleanupTimeout = 5 * time.Second
)

type config struct {
	prefix  string
	ttl     time.Duration
	margin  time.Duration // 0: max(TTL/10, 250ms) of the granted TTL
	cleanup time.Duration
	timings Timings
	logger  *zap.Logger
}

// newConfig reads the options New takes: package lock's SessionOptions
// that a kubelock.Lock honours — lock.WithPrefix (which must also start
// with '/'), lock.WithTTL, lock.WithSafetyMargin, lock.WithCleanupTimeout
// and lock.WithLogger — over this package's defaults. It rejects the
// others: a Lock has no session of its own (client-go's Update renews
// its lease, identity is New's argument).
func newConfig(t Timings, opts []lock.SessionOption) (config, error) {
	if err := lock.ValidateSessionOptions(opts...); err != nil {
		return config{}, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	set := settings.Of(opts)
	switch {
	case set.Owner != "":
		return config{}, invalid("lock.WithOwner: the identity is New's argument")
	case set.RenewInterval != 0 || set.Clock != nil || set.Metrics || set.LockDelay != 0:
		return config{}, invalid("lock.WithRenewInterval, WithClock, WithMetrics and WithLockDelay do not apply to a kubelock.Lock")
	case set.Prefix != "" && !strings.HasPrefix(set.Prefix, "/"):
		return config{}, invalid("prefix %q must start and end with '/'", set.Prefix)
	}
	c := config{prefix: cmp.Or(set.Prefix, DefaultPrefix), ttl: cmp.Or(set.TTL, DefaultTTL), margin: set.SafetyMargin,
		cleanup: cmp.Or(set.CleanupTimeout, DefaultCleanupTimeout), timings: t, logger: set.Logger}
	if c.logger == nil {
		c.logger = zap.NewNop()
	}
	return c, nil
}

// SetMetrics sends the lock's measurements to m from now on (default:
// none); package kubemetrics provides a Prometheus m. m must not be nil
// (ErrInvalidOption). These are the lock's own: package lock's
// WithMetrics, which measures a session, does not apply to a Lock.
func (l *Lock) SetMetrics(m Metrics) error {
	if m == nil {
		return invalid("nil metrics")
	}
	l.mu.Lock()
	l.metrics = m
	l.mu.Unlock()
	return nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidOption, fmt.Sprintf(format, args...))
}

// marginFor returns the safety margin for a granted TTL.
func (c config) marginFor(granted time.Duration) time.Duration {
	return lease.Margin(c.margin, granted)
}
