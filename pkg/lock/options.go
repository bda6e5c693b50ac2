package lock

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/pkg/clock"
	"github.com/etcdlock/etcdlock/pkg/lease"
)

// DefaultPrefix is the etcd key prefix under which locks live by default.
const DefaultPrefix = "/etcdlock/"

// DefaultTTL is the lease TTL requested by default.
const DefaultTTL = 10 * time.Second

// MaxTTL is the longest lease TTL etcd grants (its lease.MaxLeaseTTL,
// 9,000,000,000 s); a longer request fails there with "too large TTL".
const MaxTTL = 9_000_000_000 * time.Second

// ValidateTTL reports whether ttl can be requested from etcd: at least one
// second and at most MaxTTL. etcd may still raise it to its minimum.
func ValidateTTL(ttl time.Duration) error {
	if ttl < time.Second {
		return invalid("TTL %v is below one second", ttl)
	}
	if ttl > MaxTTL {
		return invalid("TTL %v is above etcd's maximum %v", ttl, MaxTTL)
	}
	return nil
}

// DefaultCleanupTimeout is the bound of WithCleanupTimeout by default.
const DefaultCleanupTimeout = 5 * time.Second

// Clock is the time source of the lease deadline and renewals, etcdlock's
// own clock.Clock: clock.Real() by default; tests pass WithClock a
// *clocktest.Fake (github.com/etcdlock/etcdlock/pkg/clock/clocktest).
type Clock = clock.Clock

// Option configures one of the package's entry points. Each option's doc
// names the entry points it applies to; given to any other, it is rejected
// with ErrInvalidOption, never ignored. Of two options with the same
// OptionName, the later one sets the value.
type Option interface {
	apply(c *config, at entry) error
	kind() string
}

// OptionName returns the name of the function that made o ("WithTTL"), or
// "" for a nil o, so that a caller combining options from two sources can
// tell when both set the same thing.
func OptionName(o Option) string {
	if o == nil {
		return ""
	}
	return o.kind()
}

// entry is a set of the entry points that take options.
type entry uint8

const (
	atSession  entry = 1 << iota // NewSession (and election's SessionOptions)
	atDetached                   // NewDetached
	atRead                       // Inspect, List, Follow
	atBreak                      // Break
	atAcquire                    // Session.Acquire, TryAcquire and AcquireAll
	atAll      = atSession | atDetached | atRead | atBreak
)

func (e entry) String() string {
	switch e {
	case atSession:
		return "NewSession"
	case atDetached:
		return "NewDetached"
	case atRead:
		return "Inspect, List and Follow"
	case atBreak:
		return "Break"
	case atAcquire:
		return "Acquire, TryAcquire and AcquireAll"
	}
	return fmt.Sprintf("entry(%d)", uint8(e))
}

// option is an Option named name that applies to the entry points in at.
type option struct {
	name string
	at   entry
	set  func(*config) error
}

func (o option) kind() string { return o.name }

func (o option) apply(c *config, at entry) error {
	if o.at&at == 0 {
		return invalid("%s does not apply to %v", o.name, at)
	}
	return o.set(c)
}

type config struct {
	ttl            time.Duration
	owner          string
	logger         *zap.Logger
	prefix         string
	margin         time.Duration // 0: the default (see safetyMargin)
	renewInterval  time.Duration // 0: granted TTL/3
	clock          Clock
	cleanupTimeout time.Duration
	renewHook      func(latency time.Duration, err error)
	metrics        Metrics
	acquire        acquireConfig // a session's defaults for its acquisitions
	origin         origin        // this process, for the records it writes
}

// acquireConfig is what the options of one acquisition set (atAcquire);
// options that also apply to NewSession set the session's defaults.
type acquireConfig struct {
	limit     int           // WithLimit: holders at once; 0 and 1 are a mutex
	shared    bool          // WithShared: a reader of a read-write lock
	lockDelay time.Duration // WithLockDelay: 0 is off
	names     []string      // AcquireAll's names (Record.Names); set by claim
}

// newAcquireConfig applies opts, given to an acquisition, over the
// session's defaults.
func (s *Session) newAcquireConfig(opts []Option) (acquireConfig, error) {
	c := config{acquire: s.cfg.acquire}
	for _, o := range opts {
		if o == nil {
			return acquireConfig{}, invalid("nil option")
		}
		if err := o.apply(&c, atAcquire); err != nil {
			return acquireConfig{}, err
		}
	}
	if c.acquire.shared && c.acquire.semaphore() {
		return acquireConfig{}, invalid("WithLimit and WithShared cannot be combined")
	}
	if c.acquire.lockDelay > 0 && (c.acquire.shared || c.acquire.semaphore()) {
		return acquireConfig{}, invalid("WithLockDelay applies to plain locks, not with WithLimit or WithShared")
	}
	return c.acquire, nil
}

// ValidateSessionOptions returns the error NewSession would return for
// opts before it contacts etcd: an option out of range or one that does
// not apply to sessions, or a safety margin not below the TTL. (NewSession
// also checks the margin and the renewal interval against the TTL etcd
// grants.)
func ValidateSessionOptions(opts ...Option) error {
	_, err := newConfig(atSession, opts)
	return err
}

// ValidateReadOptions returns the error Inspect, List and Follow would
// return for opts before they contact etcd: an option out of range or one
// that does not apply to them.
func ValidateReadOptions(opts ...Option) error {
	_, err := newConfig(atRead, opts)
	return err
}

// newConfig applies opts for the entry point at, rejecting any option that
// does not apply there.
func newConfig(at entry, opts []Option) (config, error) {
	c := config{
		ttl:            DefaultTTL,
		logger:         zap.NewNop(),
		prefix:         DefaultPrefix,
		clock:          clock.Real(),
		cleanupTimeout: DefaultCleanupTimeout,
		metrics:        nopMetrics{},
	}
	for _, o := range opts {
		if o == nil {
			return config{}, invalid("nil option")
		}
		if err := o.apply(&c, at); err != nil {
			return config{}, err
		}
	}
	// Detached checks the margin against the TTL of each call instead.
	if at == atSession {
		if err := c.marginBelow(c.ttl); err != nil {
			return config{}, err
		}
	}
	c.origin = thisProcess()
	if c.owner == "" {
		c.owner = c.origin.newOwner()
	}
	return c, nil
}

// validateClient rejects a nil client, which the entry points would
// otherwise dereference and panic on.
func validateClient(client *clientv3.Client) error {
	if client == nil {
		return invalid("nil client")
	}
	return nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidOption}, args...)...)
}

// WithTTL sets the lease TTL requested from etcd (default 10s), between one
// second and MaxTTL (see ValidateTTL). etcd works in whole seconds (the
// request is rounded up) and raises TTLs below its minimum (about 2s with
// default raft settings); the session uses the TTL etcd granted, never the
// request. For NewSession (Detached takes the TTL per call).
func WithTTL(ttl time.Duration) Option {
	return option{"WithTTL", atSession, func(c *config) error {
		if err := ValidateTTL(ttl); err != nil {
			return err
		}
		c.ttl = ttl
		return nil
	}}
}

// WithOwner sets the owner identity written into every key of the session
// (default DefaultOwner()). It is informational. For NewSession (Detached
// takes the owner per call and checks it).
func WithOwner(owner string) Option {
	return option{"WithOwner", atSession, func(c *config) error {
		if err := validateOwner(owner); err != nil {
			return err
		}
		c.owner = owner
		return nil
	}}
}

// validateOwner is WithOwner's check, which Detached also applies to the
// owner it takes per call.
func validateOwner(owner string) error {
	if owner == "" {
		return invalid("empty owner")
	}
	return nil
}

// WithLogger sets the session's logger (default zap.NewNop()). For
// NewSession.
func WithLogger(lg *zap.Logger) Option {
	return option{"WithLogger", atSession, func(c *config) error {
		if lg == nil {
			return invalid("nil logger")
		}
		c.logger = lg
		return nil
	}}
}

// WithPrefix sets the etcd key prefix (default "/etcdlock/"). It must end in
// '/'. Every party using a lock name must use the same prefix. For every
// entry point.
func WithPrefix(prefix string) Option {
	return option{"WithPrefix", atAll, func(c *config) error {
		if err := validatePrefix(prefix); err != nil {
			return err
		}
		c.prefix = prefix
		return nil
	}}
}

// validatePrefix is WithPrefix's check, which NamePrefix also applies.
func validatePrefix(prefix string) error {
	if !strings.HasSuffix(prefix, "/") {
		return invalid("prefix %q must end in '/'", prefix)
	}
	return nil
}

// WithSafetyMargin sets how long before the earliest possible server-side
// expiry the session considers itself lost (default max(TTL/10, 250ms)). It
// covers clock-rate drift and scheduling delay. It must be below the TTL
// and, for NewSession, below the granted TTL minus the renewal interval.
// For NewSession and NewDetached.
func WithSafetyMargin(d time.Duration) Option {
	return option{"WithSafetyMargin", atSession | atDetached, func(c *config) error {
		if d <= 0 {
			return invalid("safety margin %v must be positive", d)
		}
		c.margin = d
		return nil
	}}
}

// WithRenewInterval sets how often the lease is renewed (default TTL/3).
// For NewSession.
func WithRenewInterval(d time.Duration) Option {
	return option{"WithRenewInterval", atSession, func(c *config) error {
		if d <= 0 {
			return invalid("renew interval %v must be positive", d)
		}
		c.renewInterval = d
		return nil
	}}
}

// WithClock sets the time source of the lease deadline and renewals
// (default the real clock). The watch stream's delays and retries always
// run on the real clock. For NewSession and NewDetached.
func WithClock(clk Clock) Option {
	return option{"WithClock", atSession | atDetached, func(c *config) error {
		if clk == nil {
			return invalid("nil clock")
		}
		c.clock = clk
		return nil
	}}
}

// WithCleanupTimeout bounds the clean-up that runs after a canceled
// Acquire or a failed TryAcquire, and the lease revoke of Detached and
// Break (default DefaultCleanupTimeout, 5s). Clean-up runs on a fresh
// context, so it happens even when the caller's context has ended. For
// NewSession, NewDetached and Break.
func WithCleanupTimeout(d time.Duration) Option {
	return option{"WithCleanupTimeout", atSession | atDetached | atBreak, func(c *config) error {
		if d <= 0 {
			return invalid("cleanup timeout %v must be positive", d)
		}
		c.cleanupTimeout = d
		return nil
	}}
}

// DefaultOwner returns a new owner identity "host:pid:random", the default
// of WithOwner.
func DefaultOwner() string { return thisProcess().newOwner() }

// newOwner returns a new owner identity "host:pid:random" for o.
func (o origin) newOwner() string {
	host := o.host
	if host == "" {
		host = "unknown"
	}
	return fmt.Sprintf("%s:%d:%08x", host, o.pid, rand.Uint32())
}

// marginBelow rejects a safety margin given to WithSafetyMargin that is not
// below ttl: every lease of that TTL would be lost as soon as granted.
func (c config) marginBelow(ttl time.Duration) error {
	if c.margin >= ttl {
		return invalid("safety margin %v must be below the TTL %v", c.margin, ttl)
	}
	return nil
}

// safetyMargin is the margin for a lease granted ttl: the one given to
// WithSafetyMargin, else lease.DefaultMargin.
func (c config) safetyMargin(ttl time.Duration) time.Duration { return lease.Margin(c.margin, ttl) }

// WithRenewHook calls fn after every lease renewal attempt with its latency
// and error (nil on success), for metrics. fn runs on the renewal goroutine
// and must return quickly. For NewSession.
func WithRenewHook(fn func(latency time.Duration, err error)) Option {
	return option{"WithRenewHook", atSession, func(c *config) error {
		if fn == nil {
			return invalid("nil renew hook")
		}
		c.renewHook = fn
		return nil
	}}
}
