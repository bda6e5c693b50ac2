package election

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/pkg/clock"
	"github.com/etcdlock/etcdlock/pkg/internal/keyspace"
	"github.com/etcdlock/etcdlock/pkg/internal/settings"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// ErrInvalidConfig is wrapped by New's errors for an unusable Config.
var ErrInvalidConfig = errors.New("election: invalid config")

// Config configures an Elector: what is the election's own. What its
// sessions do — TTL, identity (lock.WithOwner), prefix, logger, clock,
// safety margin — is set by the lock.SessionOptions given to New. Zero
// durations take their defaults.
type Config struct {
	// Client is the etcd client (required). It must outlive Run.
	Client *clientv3.Client
	// Name is the election's lock name (required; see lock.ValidateName).
	Name string
	// RetryMin and RetryMax bound the backoff after etcd errors (defaults
	// 250ms and 5s).
	RetryMin, RetryMax time.Duration
	// ReleaseOnCancel resigns (deletes the leader key and revokes the
	// lease) when Run's context is canceled, so a follower takes over at
	// once. When false the lease is left to expire and no one leads for
	// up to the TTL.
	ReleaseOnCancel bool
	// Metrics, if set, receives the elector's measurements, its sessions'
	// lease renewals included; package electionmetrics records them with
	// Prometheus. Use one per Elector.
	Metrics Metrics
	// Callbacks are run as described on Callbacks.
	Callbacks Callbacks

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

// session is what the elector reads of its lock.SessionOptions, with
// their defaults.
type session struct {
	opts     []lock.SessionOption
	identity string
	prefix   string
	logger   *zap.Logger
	clock    clock.Clock   // lock.WithClock, else the real clock
	margin   time.Duration // lock.WithSafetyMargin; 0 is the default
}

func (c *Config) validate(opts []lock.SessionOption) (session, error) {
	switch {
	case c.Client == nil:
		return session{}, fmt.Errorf("%w: nil Client", ErrInvalidConfig)
	case c.Callbacks.OnStartedLeading == nil:
		return session{}, fmt.Errorf("%w: nil OnStartedLeading", ErrInvalidConfig)
	case c.RetryMin < 0 || c.RetryMax < 0:
		return session{}, fmt.Errorf("%w: negative duration", ErrInvalidConfig)
	}
	if err := lock.ValidateName(c.Name); err != nil {
		return session{}, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if c.RetryMin == 0 {
		c.RetryMin = 250 * time.Millisecond
	}
	if c.RetryMax == 0 {
		c.RetryMax = 5 * time.Second
	}
	if c.RetryMax < c.RetryMin {
		return session{}, fmt.Errorf("%w: RetryMax %v below RetryMin %v", ErrInvalidConfig, c.RetryMax, c.RetryMin)
	}
	// Checked here, once, so that Run does not retry a configuration
	// error forever.
	if err := lock.ValidateSessionOptions(opts...); err != nil {
		return session{}, fmt.Errorf("%w: session options: %w", ErrInvalidConfig, err)
	}
	set := settings.Of(opts)
	switch {
	case set.LockDelay != 0:
		// The wait after an unclean end is the tenure key's.
		return session{}, fmt.Errorf("%w: lock.WithLockDelay: the election waits after an unclean end on its own", ErrInvalidConfig)
	case set.Metrics && c.Metrics != nil:
		return session{}, fmt.Errorf("%w: lock.WithMetrics and Config.Metrics: Metrics records the renewals", ErrInvalidConfig)
	}
	s := session{identity: cmp.Or(set.Owner, keyspace.ThisProcess().NewOwner()), prefix: cmp.Or(set.Prefix, lock.DefaultPrefix), logger: set.Logger}
	if s.logger == nil {
		s.logger = zap.NewNop()
	}
	s.clock, s.margin = set.Clock, set.SafetyMargin
	if s.clock == nil {
		s.clock = clock.Real()
	}
	// The identity is fixed here, so that every term's session has it.
	s.opts = append(append([]lock.SessionOption{}, opts...), lock.WithOwner(s.identity))
	if c.Metrics != nil {
		s.opts = append(s.opts, lock.WithMetrics(renewals{c.Metrics}))
	}
	return s, nil
}

// options are the options of a term's session, with log as its logger.
func (s session) options(log *zap.Logger) []lock.SessionOption {
	return append(s.opts[:len(s.opts):len(s.opts)], lock.WithLogger(log))
}

// renewals is the lock.Metrics of a term's session: it passes the lease
// renewals on to the election's Metrics.
type renewals struct{ m Metrics }

func (renewals) Waiting(int)                               {}
func (renewals) Acquired(time.Duration)                    {}
func (renewals) Ended(time.Duration, error)                {}
func (r renewals) LeaseRenewed(d time.Duration, err error) { r.m.LeaseRenewed(d, err) }
