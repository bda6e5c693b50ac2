package lock

import (
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/pkg/clock"
	"github.com/etcdlock/etcdlock/pkg/internal/keyspace"
	"github.com/etcdlock/etcdlock/pkg/lease"
)

// Defaults and bounds.
const (
	// DefaultPrefix is the etcd key prefix under which locks live.
	DefaultPrefix = "/etcdlock/"
	// MaxNames is the most names one AcquireAll takes: its transaction puts
	// one key and reads one predecessor per name, within etcd's default
	// limit of 128 operations per transaction (--max-txn-ops).
	MaxNames = 64
)

// defaultTTL is WithTTL's default.
const defaultTTL = 10 * time.Second

// defaultCleanupTimeout is WithCleanupTimeout's default.
const defaultCleanupTimeout = 5 * time.Second

// maxTTL is the longest lease TTL etcd grants (its lease.MaxLeaseTTL,
// 9,000,000,000 s); a longer request fails there with "too large TTL".
const maxTTL = 9_000_000_000 * time.Second

// validateTTL is WithTTL's check, which package detached also applies to
// the TTL it takes per call: at least one second and at most maxTTL. etcd may
// still raise it to its minimum.
func validateTTL(ttl time.Duration) error {
	if ttl < time.Second {
		return invalid("TTL %v is below one second", ttl)
	}
	if ttl > maxTTL {
		return invalid("TTL %v is above etcd's maximum %v", ttl, maxTTL)
	}
	return nil
}

// SessionOption configures NewSession (and ValidateSessionOptions), and
// the sessions of package election and kubelock's locks.
type SessionOption interface {
	option
	sessionOption()
}

// DetachedOption configures detached.New.
type DetachedOption interface {
	option
	detachedOption()
}

// AcquireOption configures one acquisition: Session.Acquire, TryAcquire
// and AcquireAll. It overrides the session's default of the same setting.
type AcquireOption interface {
	option
	acquireOption()
}

// option is what every option does, whatever its entry points: check its
// value and set it in c.
type option interface {
	set(c *config) error
}

// apply sets opts in c in order, rejecting a nil option.
func apply[O option](c *config, opts []O) error {
	for _, o := range opts {
		if any(o) == nil {
			return invalid("nil option")
		}
		if err := o.set(c); err != nil {
			return err
		}
	}
	return nil
}

type config struct {
	ttl            time.Duration
	owner          string
	logger         *zap.Logger
	prefix         string
	margin         time.Duration // 0: the default (see safetyMargin)
	renewInterval  time.Duration // 0: granted TTL/3
	clock          clock.Clock
	cleanupTimeout time.Duration
	metrics        Metrics
	acquire        acquireConfig   // a session's defaults for its acquisitions
	origin         keyspace.Origin // this process, for the records it writes
}

// acquireConfig is what the options of one acquisition set
// (AcquireOption); those that are also SessionOptions set the session's
// defaults.
type acquireConfig struct {
	limit     int           // WithLimit: holders at once; 0 and 1 are a mutex
	shared    bool          // WithShared: a reader of a read-write lock
	lockDelay time.Duration // WithLockDelay: 0 is off
	names     []string      // AcquireAll's names (keyspace.Record.Names); set by claim
	waitHook  func()        // WithWaitHook: nil is none
}

// newAcquireConfig applies opts, given to an acquisition, over defaults,
// the session's.
func newAcquireConfig(defaults acquireConfig, opts []AcquireOption) (acquireConfig, error) {
	c := config{acquire: defaults}
	if err := apply(&c, opts); err != nil {
		return acquireConfig{}, err
	}
	if err := c.acquire.oneKind(); err != nil {
		return acquireConfig{}, err
	}
	return c.acquire, nil
}

// ValidateSessionOptions returns the error NewSession would return for
// opts before it contacts etcd (NewSession also checks them against the
// TTL etcd grants), so that options kept for later are rejected up front.
func ValidateSessionOptions(opts ...SessionOption) error {
	_, err := newSessionConfig(opts)
	return err
}

// ValidateAcquireOptions returns the error Acquire would return for opts,
// before it contacts etcd, on a session without acquisition defaults.
func ValidateAcquireOptions(opts ...AcquireOption) error {
	_, err := newAcquireConfig(acquireConfig{}, opts)
	return err
}

// newSessionConfig is newConfig for NewSession, which also needs the
// safety margin below the TTL (package detached checks it against the TTL of each
// call instead).
func newSessionConfig(opts []SessionOption) (config, error) {
	c, err := newConfig(opts)
	if err != nil {
		return config{}, err
	}
	if err := c.marginBelow(c.ttl); err != nil {
		return config{}, err
	}
	return c, nil
}

// newConfig applies opts over the defaults.
func newConfig[O option](opts []O) (config, error) {
	c := config{
		ttl:            defaultTTL,
		logger:         zap.NewNop(),
		prefix:         DefaultPrefix,
		clock:          clock.Real(),
		cleanupTimeout: defaultCleanupTimeout,
		metrics:        nopMetrics{},
	}
	if err := apply(&c, opts); err != nil {
		return config{}, err
	}
	c.origin = keyspace.ThisProcess()
	if c.owner == "" {
		c.owner = c.origin.NewOwner()
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
