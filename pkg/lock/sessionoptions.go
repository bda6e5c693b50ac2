package lock

import (
	"strings"
	"time"

	"go.uber.org/zap"
)

// TTLOption is what WithTTL returns: a SessionOption.
type TTLOption struct{ ttl time.Duration }

// WithTTL sets the lease TTL requested from etcd (default 10s), between one
// second and MaxTTL (see ValidateTTL). etcd works in whole seconds (the
// request is rounded up) and raises TTLs below its minimum (about 2s with
// default raft settings); the session uses the TTL etcd granted, never the
// request. A SessionOption (Detached takes the TTL per call).
func WithTTL(ttl time.Duration) TTLOption { return TTLOption{ttl} }

func (o TTLOption) set(c *config) error {
	if err := ValidateTTL(o.ttl); err != nil {
		return err
	}
	c.ttl = o.ttl
	return nil
}

func (TTLOption) sessionOption() {}

// OwnerOption is what WithOwner returns: a SessionOption.
type OwnerOption struct{ owner string }

// WithOwner sets the owner identity written into every key of the session
// (default DefaultOwner()); it must not be empty. It is informational. A
// SessionOption (Detached takes the owner per call and checks it).
func WithOwner(owner string) OwnerOption { return OwnerOption{owner} }

func (o OwnerOption) set(c *config) error {
	if err := validateOwner(o.owner); err != nil {
		return err
	}
	c.owner = o.owner
	return nil
}

func (OwnerOption) sessionOption() {}

// validateOwner is WithOwner's check, which Detached also applies to the
// owner it takes per call.
func validateOwner(owner string) error {
	if owner == "" {
		return invalid("empty owner")
	}
	return nil
}

// LoggerOption is what WithLogger returns: a SessionOption.
type LoggerOption struct{ lg *zap.Logger }

// WithLogger sets the session's logger (default zap.NewNop()); it must not
// be nil. A SessionOption.
func WithLogger(lg *zap.Logger) LoggerOption { return LoggerOption{lg} }

func (o LoggerOption) set(c *config) error {
	if o.lg == nil {
		return invalid("nil logger")
	}
	c.logger = o.lg
	return nil
}

func (LoggerOption) sessionOption() {}

// PrefixOption is what WithPrefix returns: a SessionOption, a
// DetachedOption, a ReadOption and a BreakOption.
type PrefixOption struct{ prefix string }

// WithPrefix sets the etcd key prefix (default "/etcdlock/"). It must end in
// '/'. Every party using a lock name must use the same prefix. A
// SessionOption, DetachedOption, ReadOption and BreakOption.
func WithPrefix(prefix string) PrefixOption { return PrefixOption{prefix} }

func (o PrefixOption) set(c *config) error {
	if err := validatePrefix(o.prefix); err != nil {
		return err
	}
	c.prefix = o.prefix
	return nil
}

func (PrefixOption) sessionOption()  {}
func (PrefixOption) detachedOption() {}
func (PrefixOption) readOption()     {}
func (PrefixOption) breakOption()    {}

// validatePrefix is WithPrefix's check, which NamePrefix also applies.
func validatePrefix(prefix string) error {
	if !strings.HasSuffix(prefix, "/") {
		return invalid("prefix %q must end in '/'", prefix)
	}
	return nil
}

// SafetyMarginOption is what WithSafetyMargin returns: a SessionOption and
// a DetachedOption.
type SafetyMarginOption struct{ d time.Duration }

// WithSafetyMargin sets how long before the earliest possible server-side
// expiry the session considers itself lost (default max(TTL/10, 250ms)). It
// covers clock-rate drift and scheduling delay. It must be positive and
// below the TTL and, for NewSession, below the granted TTL minus the
// renewal interval. A SessionOption and DetachedOption.
func WithSafetyMargin(d time.Duration) SafetyMarginOption { return SafetyMarginOption{d} }

func (o SafetyMarginOption) set(c *config) error {
	if o.d <= 0 {
		return invalid("safety margin %v must be positive", o.d)
	}
	c.margin = o.d
	return nil
}

func (SafetyMarginOption) sessionOption()  {}
func (SafetyMarginOption) detachedOption() {}

// RenewIntervalOption is what WithRenewInterval returns: a SessionOption.
type RenewIntervalOption struct{ d time.Duration }

// WithRenewInterval sets how often the lease is renewed (default TTL/3);
// it must be positive. A SessionOption.
func WithRenewInterval(d time.Duration) RenewIntervalOption { return RenewIntervalOption{d} }

func (o RenewIntervalOption) set(c *config) error {
	if o.d <= 0 {
		return invalid("renew interval %v must be positive", o.d)
	}
	c.renewInterval = o.d
	return nil
}

func (RenewIntervalOption) sessionOption() {}

// ClockOption is what WithClock returns: a SessionOption and a
// DetachedOption.
type ClockOption struct{ clk Clock }

// WithClock sets the time source of the lease deadline and renewals
// (default the real clock); it must not be nil. The watch stream's delays
// and retries always run on the real clock. A SessionOption and
// DetachedOption.
func WithClock(clk Clock) ClockOption { return ClockOption{clk} }

func (o ClockOption) set(c *config) error {
	if o.clk == nil {
		return invalid("nil clock")
	}
	c.clock = o.clk
	return nil
}

func (ClockOption) sessionOption()  {}
func (ClockOption) detachedOption() {}

// CleanupTimeoutOption is what WithCleanupTimeout returns: a
// SessionOption, a DetachedOption and a BreakOption.
type CleanupTimeoutOption struct{ d time.Duration }

// WithCleanupTimeout bounds the clean-up that runs after a canceled
// Acquire or a failed TryAcquire, and the lease revoke of Detached and
// Break (default DefaultCleanupTimeout, 5s); it must be positive. Clean-up
// runs on a fresh context, so it happens even when the caller's context
// has ended. A SessionOption, DetachedOption and BreakOption.
func WithCleanupTimeout(d time.Duration) CleanupTimeoutOption { return CleanupTimeoutOption{d} }

func (o CleanupTimeoutOption) set(c *config) error {
	if o.d <= 0 {
		return invalid("cleanup timeout %v must be positive", o.d)
	}
	c.cleanupTimeout = o.d
	return nil
}

func (CleanupTimeoutOption) sessionOption()  {}
func (CleanupTimeoutOption) detachedOption() {}
func (CleanupTimeoutOption) breakOption()    {}

// RenewHookOption is what WithRenewHook returns: a SessionOption.
type RenewHookOption struct {
	fn func(latency time.Duration, err error)
}

// WithRenewHook calls fn after every lease renewal attempt with its latency
// and error (nil on success), for metrics. fn must not be nil; it runs on
// the renewal goroutine and must return quickly. A SessionOption.
func WithRenewHook(fn func(latency time.Duration, err error)) RenewHookOption {
	return RenewHookOption{fn}
}

func (o RenewHookOption) set(c *config) error {
	if o.fn == nil {
		return invalid("nil renew hook")
	}
	c.renewHook = o.fn
	return nil
}

func (RenewHookOption) sessionOption() {}
