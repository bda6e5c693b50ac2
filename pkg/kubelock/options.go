package kubelock

import (
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/internal/kuberecord"
	"github.com/etcdlock/etcdlock/pkg/lease"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// Defaults.
const (
	// DefaultPrefix is the key prefix of the records: a record's key is the
	// prefix followed by the election's name, and the key of its term
	// count that key followed by "\x00terms". It is apart from package
	// lock's DefaultPrefix, so that `etcdlock list` does not take records
	// for locks.
	DefaultPrefix = kuberecord.DefaultPrefix
	// DefaultTTL is the etcd lease TTL of a term. Each successful Update
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

// Option configures New. Options are a closed set: those of this package.
type Option interface{ apply(*config) error }

type option func(*config) error

func (f option) apply(c *config) error { return f(c) }

type config struct {
	prefix  string
	ttl     time.Duration
	margin  time.Duration // 0: max(TTL/10, 250ms) of the granted TTL
	cleanup time.Duration
	timings Timings
	logger  *zap.Logger
	metrics Metrics
	events  *events // nil: events are only logged
}

// WithPrefix sets the key prefix of the record (default DefaultPrefix). It
// must start and end with '/'.
func WithPrefix(prefix string) Option {
	return option(func(c *config) error {
		if !strings.HasPrefix(prefix, "/") || !strings.HasSuffix(prefix, "/") {
			return invalid("prefix %q must start and end with '/'", prefix)
		}
		c.prefix = prefix
		return nil
	})
}

// WithTTL sets the etcd lease TTL of a term (default DefaultTTL), within
// package lock's bounds (lock.ValidateTTL). etcd raises a TTL below its
// minimum (about 2 s with default election settings); the lock works with
// the TTL etcd granted. A crashed leader's record disappears after about
// the TTL; a leader whose Updates are further apart than the TTL less the
// safety margin loses its term.
func WithTTL(ttl time.Duration) Option {
	return option(func(c *config) error {
		if err := lock.ValidateTTL(ttl); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidOption, err)
		}
		c.ttl = ttl
		return nil
	})
}

// WithSafetyMargin sets how long before the earliest possible server-side
// expiry of the lease a term ends (default max(TTL/10, 250ms) of the TTL
// etcd granted). It must be positive and below the requested TTL; etcd
// only ever grants that TTL or a longer one.
func WithSafetyMargin(d time.Duration) Option {
	return option(func(c *config) error {
		if d <= 0 {
			return invalid("safety margin %v must be positive", d)
		}
		c.margin = d
		return nil
	})
}

// WithCleanupTimeout bounds the lease revoke after a term ends (default
// DefaultCleanupTimeout). A revoke cut short only delays the next
// candidate: the record still goes when etcd expires the lease.
func WithCleanupTimeout(d time.Duration) Option {
	return option(func(c *config) error {
		if d <= 0 {
			return invalid("clean-up timeout %v must be positive", d)
		}
		c.cleanup = d
		return nil
	})
}

// WithTimings gives the lock the durations of the elector it serves
// (default DefaultTimings, client-go's and controller-runtime's defaults).
// New checks them as client-go's NewLeaderElector does and against the
// TTL (see Timings), and the lock bounds each call by Timings.CallTimeout.
// Give the elector the same durations: Lock.Timings returns them.
func WithTimings(t Timings) Option {
	return option(func(c *config) error {
		c.timings = t
		return nil
	})
}

// WithLogger sets the logger (default: none). RecordEvent logs the
// elector's events on it.
func WithLogger(lg *zap.Logger) Option {
	return option(func(c *config) error {
		if lg == nil {
			return invalid("nil logger")
		}
		c.logger = lg
		return nil
	})
}

// WithMetrics sends the lock's measurements to m (default: none); package
// kubemetrics provides a Prometheus m. m must not be nil.
func WithMetrics(m Metrics) Option {
	return option(func(c *config) error {
		if m == nil {
			return invalid("nil metrics")
		}
		c.metrics = m
		return nil
	})
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidOption, fmt.Sprintf(format, args...))
}

// marginFor returns the safety margin for a granted TTL.
func (c config) marginFor(granted time.Duration) time.Duration {
	return lease.Margin(c.margin, granted)
}
