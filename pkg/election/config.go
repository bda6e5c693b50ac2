package election

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/pkg/lock"
)

// ErrInvalidConfig is wrapped by New's errors for an unusable Config.
var ErrInvalidConfig = errors.New("election: invalid config")

// Config configures an Elector. Zero durations take their defaults.
type Config struct {
	// Client is the etcd client (required). It must outlive Run.
	Client *clientv3.Client
	// Name is the election's lock name (required; see lock.ValidateName).
	Name string
	// Identity names this candidate to the others (default host:pid:random).
	Identity string
	// TTL is the lease TTL (default 10s). The leader stops by TTL minus
	// the safety margin after its last successful renewal, and after its
	// last proof of its keys; after a term that ended uncleanly (a crash,
	// a lost deadline, a deleted key, a revoked lease) the next leader
	// waits until the old leader must have stopped: at most about one TTL.
	TTL time.Duration
	// Prefix is the etcd key prefix (default lock.DefaultPrefix).
	Prefix string
	// RetryMin and RetryMax bound the backoff after etcd errors (defaults
	// 250ms and 5s).
	RetryMin, RetryMax time.Duration
	// ReleaseOnCancel resigns (deletes the leader key and revokes the
	// lease) when Run's context is canceled, so a follower takes over at
	// once. When false the lease is left to expire and no one leads for
	// up to TTL.
	ReleaseOnCancel bool
	// Logger receives the elector's logs (default zap.NewNop()).
	Logger *zap.Logger
	// Metrics, if set, receives the elector's measurements; package
	// electionmetrics records them with Prometheus. Use one per Elector.
	Metrics Metrics
	// Callbacks are run as described on Callbacks.
	Callbacks Callbacks
	// SessionOptions are extra options for the term's lock.Session
	// (safety margin, clock, ...). The session's TTL, owner, prefix and
	// logger are set in one place, the fields above, and so is, when
	// Metrics is set, its renew hook; the wait after an unclean end is
	// the election's own. New rejects WithTTL, WithOwner, WithPrefix,
	// WithLogger and WithLockDelay here, and WithRenewHook with Metrics.
	SessionOptions []lock.SessionOption

	// noTenure turns the tenure keys off — no wait after an unclean end,
	// no proofs of the keys: the negative control of the tests' overlap
	// check (export_test.go), never set otherwise.
	noTenure bool
	// proofFault, if set, is called before each proof of a term's keys,
	// which fails with its error: the tests' fault injection
	// (export_test.go).
	proofFault func() error
}

// Callbacks are called by Run. Within one Elector they never run
// concurrently for two terms: a term's OnStoppedLeading returns before the
// next term's OnStartedLeading starts.
type Callbacks struct {
	// OnStartedLeading runs, in its own goroutine, when a term starts. ctx
	// is canceled the moment leadership can no longer be proven (the
	// term's deadline passed, the leader key was deleted, the lease
	// revoked, the session lost) or when Run's context ends — before any
	// other candidate's OnStartedLeading starts. It must return promptly
	// after ctx is canceled: the next campaign waits for it. If it
	// returns while still leading, the elector resigns and campaigns
	// again, so that leadership never sits with a replica doing no work.
	// Required.
	OnStartedLeading func(ctx context.Context, term Term)
	// OnStoppedLeading runs once per term after OnStartedLeading returned.
	OnStoppedLeading func()
	// OnNewLeader runs, in Run's observer goroutine, with the identity of
	// each new leader as soon as this candidate observes it (by watch),
	// this candidate included: after an unclean end, a leader waiting for
	// the old leader to stop is observed before its term starts. It is not
	// called for vacancies, nor again when the same identity wins
	// consecutive terms.
	OnNewLeader func(identity string)
}

func (c *Config) validate() error {
	switch {
	case c.Client == nil:
		return fmt.Errorf("%w: nil Client", ErrInvalidConfig)
	case c.Callbacks.OnStartedLeading == nil:
		return fmt.Errorf("%w: nil OnStartedLeading", ErrInvalidConfig)
	case c.TTL < 0 || c.RetryMin < 0 || c.RetryMax < 0:
		return fmt.Errorf("%w: negative duration", ErrInvalidConfig)
	}
	if err := lock.ValidateName(c.Name); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if c.TTL == 0 {
		c.TTL = lock.DefaultTTL
	}
	if c.Prefix == "" {
		c.Prefix = lock.DefaultPrefix
	}
	if c.Identity == "" {
		c.Identity = lock.DefaultOwner()
	}
	if c.RetryMin == 0 {
		c.RetryMin = 250 * time.Millisecond
	}
	if c.RetryMax == 0 {
		c.RetryMax = 5 * time.Second
	}
	if c.RetryMax < c.RetryMin {
		return fmt.Errorf("%w: RetryMax %v below RetryMin %v", ErrInvalidConfig, c.RetryMax, c.RetryMin)
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	// Config's fields set the session's TTL, owner, prefix and logger, and
	// with Metrics its renew hook: the same in SessionOptions would be
	// silently overridden, so it is rejected.
	for _, o := range c.SessionOptions {
		if field := setByField(o, c.Metrics != nil); field != "" {
			return fmt.Errorf("%w: SessionOptions may not hold %T: Config's %s sets it", ErrInvalidConfig, o, field)
		}
	}
	// The options of every term's session, checked here, once, so that
	// Run does not retry a configuration error forever: lock checks the
	// TTL, the prefix and the margin against the TTL.
	if err := lock.ValidateSessionOptions(c.sessionOptions(c.Logger)...); err != nil {
		return fmt.Errorf("%w: session options (Config's fields and SessionOptions): %w", ErrInvalidConfig, err)
	}
	return nil
}

// setByField names the Config field that sets what the session option o
// sets, or returns "" if no field does.
func setByField(o lock.SessionOption, metrics bool) string {
	switch o.(type) {
	case lock.TTLOption:
		return "TTL"
	case lock.OwnerOption:
		return "Identity"
	case lock.PrefixOption:
		return "Prefix"
	case lock.LoggerOption:
		return "Logger"
	case lock.RenewHookOption:
		if metrics {
			return "Metrics"
		}
	case lock.LockDelayOption:
		return "TTL" // the wait after an unclean end: the tenure key's
	}
	return ""
}

// sessionOptions are the options of a term's session: SessionOptions and
// those that Config's fields set, with log as its logger.
func (c *Config) sessionOptions(log *zap.Logger) []lock.SessionOption {
	opts := append([]lock.SessionOption{}, c.SessionOptions...)
	opts = append(opts, lock.WithTTL(c.TTL), lock.WithOwner(c.Identity),
		lock.WithPrefix(c.Prefix), lock.WithLogger(log))
	if c.Metrics != nil {
		opts = append(opts, lock.WithRenewHook(c.Metrics.LeaseRenewed))
	}
	return opts
}
