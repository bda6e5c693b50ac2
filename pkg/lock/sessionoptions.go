package lock

import (
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/pkg/clock"
	"github.com/etcdlock/etcdlock/pkg/internal/settings"
)

// The options are of four unexported types, one per set of entry points,
// so that an option given where it does not apply does not compile.
type (
	// forSession is an option of NewSession.
	forSession func(c *config) error
	// forSessionOrDetached is an option of NewSession and detached.New.
	forSessionOrDetached func(c *config) error
	// forAcquire is an option of Acquire, TryAcquire and AcquireAll.
	forAcquire func(c *config) error
	// forSessionOrAcquire is an option of an acquisition and, given to
	// NewSession, the default of the session's acquisitions.
	forSessionOrAcquire func(c *config) error
)

func (f forSession) set(c *config) error           { return f(c) }
func (f forSessionOrDetached) set(c *config) error { return f(c) }
func (f forAcquire) set(c *config) error           { return f(c) }
func (f forSessionOrAcquire) set(c *config) error  { return f(c) }

func (forSession) sessionOption()            {}
func (forSessionOrDetached) sessionOption()  {}
func (forSessionOrDetached) detachedOption() {}
func (forAcquire) acquireOption()            {}
func (forSessionOrAcquire) sessionOption()   {}
func (forSessionOrAcquire) acquireOption()   {}

// Set implements settings.Setter: the packages built on lock read the
// SessionOptions they take through it.
func (f forSession) Set(s *settings.Settings) error { return setIn(f, s) }

// Set implements settings.Setter.
func (f forSessionOrDetached) Set(s *settings.Settings) error { return setIn(f, s) }

// Set implements settings.Setter.
func (f forSessionOrAcquire) Set(s *settings.Settings) error { return setIn(f, s) }

// setIn applies o to s through a config that holds s.
func setIn(o option, s *settings.Settings) error {
	c := config{ttl: s.TTL, owner: s.Owner, prefix: s.Prefix, logger: s.Logger, margin: s.SafetyMargin,
		renewInterval: s.RenewInterval, clock: s.Clock, cleanupTimeout: s.CleanupTimeout}
	c.acquire.lockDelay = s.LockDelay
	if err := o.set(&c); err != nil {
		return err
	}
	*s = settings.Settings{TTL: c.ttl, Owner: c.owner, Prefix: c.prefix, Logger: c.logger, SafetyMargin: c.margin,
		RenewInterval: c.renewInterval, Clock: c.clock, CleanupTimeout: c.cleanupTimeout,
		LockDelay: c.acquire.lockDelay, Metrics: s.Metrics || c.metrics != nil}
	return nil
}

// WithTTL sets the lease TTL requested from etcd: default 10 s,
// between one second and etcd's maximum, 9,000,000,000 s. The session uses
// the TTL etcd granted (Session.TTL), never the request. A SessionOption.
func WithTTL(ttl time.Duration) forSession {
	return func(c *config) error {
		if err := validateTTL(ttl); err != nil {
			return err
		}
		c.ttl = ttl
		return nil
	}
}

// WithOwner sets the owner identity, informational, written into every key
// of the session (default "host:pid:random"); it must not be empty. A
// SessionOption.
func WithOwner(owner string) forSession {
	return func(c *config) error {
		if err := validateOwner(owner); err != nil {
			return err
		}
		c.owner = owner
		return nil
	}
}

// validateOwner is WithOwner's check, which package detached also applies
// to the owner it takes per call.
func validateOwner(owner string) error {
	if owner == "" {
		return invalid("empty owner")
	}
	return nil
}

// WithLogger sets the session's logger (default zap.NewNop()); it must not
// be nil. A SessionOption.
func WithLogger(lg *zap.Logger) forSession {
	return func(c *config) error {
		if lg == nil {
			return invalid("nil logger")
		}
		c.logger = lg
		return nil
	}
}

// WithPrefix sets the etcd key prefix (default DefaultPrefix); it must end
// in '/'. Every party using a name must use the same prefix. A
// SessionOption and DetachedOption.
func WithPrefix(prefix string) forSessionOrDetached {
	return func(c *config) error {
		if !strings.HasSuffix(prefix, "/") {
			return invalid("prefix %q must end in '/'", prefix)
		}
		c.prefix = prefix
		return nil
	}
}

// WithSafetyMargin sets how long before the earliest possible expiry of
// the lease the session counts itself lost (default max(TTL/10, 250ms)). It
// must be positive, below the TTL and, for NewSession, below the granted
// TTL minus the renewal interval. A SessionOption and DetachedOption.
func WithSafetyMargin(d time.Duration) forSessionOrDetached {
	return func(c *config) error {
		if d <= 0 {
			return invalid("safety margin %v must be positive", d)
		}
		c.margin = d
		return nil
	}
}

// WithRenewInterval sets how often the lease is renewed (default TTL/3);
// it must be positive. A SessionOption.
func WithRenewInterval(d time.Duration) forSession {
	return func(c *config) error {
		if d <= 0 {
			return invalid("renew interval %v must be positive", d)
		}
		c.renewInterval = d
		return nil
	}
}

// WithClock sets the time source of the lease deadline and renewals
// (default clock.Real()); it must not be nil. A SessionOption and
// DetachedOption.
func WithClock(clk clock.Clock) forSessionOrDetached {
	return func(c *config) error {
		if clk == nil {
			return invalid("nil clock")
		}
		c.clock = clk
		return nil
	}
}

// WithCleanupTimeout bounds the clean-up, on a fresh context, after a
// canceled Acquire or a failed TryAcquire, and package detached's lease revoke
// (default 5s); it must be positive. A SessionOption and DetachedOption.
func WithCleanupTimeout(d time.Duration) forSessionOrDetached {
	return func(c *config) error {
		if d <= 0 {
			return invalid("cleanup timeout %v must be positive", d)
		}
		c.cleanupTimeout = d
		return nil
	}
}
