package election

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
	// TTL is the lease TTL (default 10s). A crashed leader is replaced
	// after about TTL; the leader stops by TTL minus the safety margin
	// after its last successful renewal.
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
	// (safety margin, clock, ...). WithTTL, WithOwner, WithPrefix and
	// WithLogger are set from the fields above.
	SessionOptions []lock.Option
}

// Callbacks are called by Run. Within one Elector they never run
// concurrently for two terms: a term's OnStoppedLeading returns before the
// next term's OnStartedLeading starts.
type Callbacks struct {
	// OnStartedLeading runs, in its own goroutine, when a term starts. ctx
	// is canceled the moment leadership can no longer be proven (the
	// conservative deadline passed, the leader key was deleted, the
	// session was lost) or when Run's context ends. It must return
	// promptly after ctx is canceled: the next campaign waits for it. If
	// it returns while still leading, the elector resigns and campaigns
	// again, so that leadership never sits with a replica doing no work.
	// Required.
	OnStartedLeading func(ctx context.Context, term Term)
	// OnStoppedLeading runs once per term after OnStartedLeading returned.
	OnStoppedLeading func()
	// OnNewLeader runs, in Run's observer goroutine, with the identity of
	// each new leader as soon as this candidate observes it (by watch),
	// this candidate included. It is not called for vacancies, nor again
	// when the same identity wins consecutive terms.
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
	case c.TTL != 0 && c.TTL < time.Second:
		return fmt.Errorf("%w: TTL %v below one second", ErrInvalidConfig, c.TTL)
	}
	if err := lock.ValidateName(c.Name); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if c.Prefix != "" && !strings.HasSuffix(c.Prefix, "/") {
		return fmt.Errorf("%w: Prefix %q must end in '/'", ErrInvalidConfig, c.Prefix)
	}
	// Checked here, once, so that Run does not retry a configuration
	// error forever.
	if err := lock.ValidateSessionOptions(c.SessionOptions...); err != nil {
		return fmt.Errorf("%w: SessionOptions: %w", ErrInvalidConfig, err)
	}
	if c.TTL == 0 {
		c.TTL = lock.DefaultTTL
	}
	if c.Prefix == "" {
		c.Prefix = lock.DefaultPrefix
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
	return nil
}
