package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/pkg/internal/watchmux"
)

// Session is one etcd lease, renewed in the background, under which locks
// are acquired; its methods are safe for concurrent use. When its
// conservative Deadline passes without a renewal, the session and every
// lock it holds are lost, locally and at once, before etcd can expire the
// lease. Loss is final (DESIGN.md, "The deadline").
type Session struct {
	client *clientv3.Client
	cfg    config
	log    *zap.Logger
	keeper *keeper // the lease, its renewals and its deadline

	// alive is canceled, with the loss or close error as its cause, the
	// moment the session stops being valid (Done is its Done). Every
	// lock's context derives from it, and renewals run under it so none
	// outlives the deadline.
	alive  context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup
	mux    *watchmux.Mux // every key watch of the session's locks and waiters

	// mu guards err and what the claims table and the ledger say it
	// guards. Lock order: Session.mu, then Lock.mu, then the Mux's own
	// mutex (Lock.watchKey takes all three).
	mu     sync.Mutex
	err    error // nil while valid
	claims claimTable
	ledger ledger
}

// NewSession grants a lease and starts renewing it; the client must
// outlive the session. ctx bounds only the grant (DefaultTimeout if it has
// no deadline), sent again while ctx lasts if a member holds it unanswered
// or answers after its lease's deadline: NewSession never returns a lost
// session, and fails with an error wrapping ErrUnavailable and ctx's.
func NewSession(ctx context.Context, client *clientv3.Client, opts ...SessionOption) (*Session, error) {
	if err := validateClient(client); err != nil {
		return nil, err
	}
	cfg, err := newSessionConfig(opts)
	if err != nil {
		return nil, err
	}
	k, err := grant(ctx, client, cfg)
	if err != nil {
		return nil, err
	}
	s := &Session{
		client: client,
		cfg:    cfg,
		log:    cfg.logger.With(zap.String("lease", fmt.Sprintf("%x", int64(k.id)))),
		keeper: k,
		claims: claimTable{byName: make(map[string]*Lock)},
		ledger: ledger{sweepNow: make(chan struct{}, 1)},
	}
	s.alive, s.cancel = context.WithCancelCause(context.Background())
	// The mux carries every watch of the session over one stream. Its
	// delays and retries run on the real clock, whatever the session's
	// clock: they pace requests to etcd, while the session's clock
	// (WithClock) measures the lease deadline.
	s.mux = watchmux.ForClient(client, s.log)
	s.wg.Add(3)
	go s.renewLoop()
	go s.watchdog()
	go func() {
		defer s.wg.Done()
		s.mux.Run(s.alive)
	}()
	s.log.Debug("session started", zap.Duration("granted-ttl", k.ttl), zap.Duration("margin", k.margin), zap.Duration("renew-every", k.every))
	return s, nil
}

// Lease returns the session's etcd lease ID.
func (s *Session) Lease() clientv3.LeaseID { return s.keeper.id }

// TTL returns the TTL etcd granted (which may exceed the one requested).
func (s *Session) TTL() time.Duration { return s.keeper.ttl }

// Deadline returns the conservative deadline: the session is valid only
// strictly before it. The server cannot expire the lease earlier than
// Deadline plus the safety margin.
func (s *Session) Deadline() time.Time {
	d, _ := s.keeper.lastDeadline()
	return d
}

// remaining is the time left until Deadline, or 0 once the session is
// lost or closed.
func (s *Session) remaining() time.Duration {
	if s.Err() != nil {
		return 0
	}
	return max(s.Deadline().Sub(s.cfg.clock.Now()), 0)
}

// Done returns a channel closed when the session is lost or closed.
func (s *Session) Done() <-chan struct{} { return s.alive.Done() }

// Err returns nil while the session is valid, ErrSessionClosed after Close,
// and a *LostError wrapping ErrSessionLost after a loss.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close releases every lock the session holds, stops renewing, waits for
// the session's goroutines and revokes the lease, which deletes its keys.
// It returns the revoke's error (the lease then expires on its own) or one
// wrapping ErrMarkersKept (DESIGN.md, "Lock-delay"). Calling it again, or
// after a loss, is safe; DefaultTimeout bounds it without a deadline in ctx.
func (s *Session) Close(ctx context.Context) error {
	if s.ledger.revoked.Load() {
		return nil // an earlier Close did all there is to do
	}
	s.mu.Lock()
	held := append(s.claims.all(), s.ledger.markers...)
	s.mu.Unlock()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	s.end(ErrSessionClosed, true)
	s.wg.Wait()
	// The acquisitions in progress, which end canceled them, finish their
	// clean-up (within the cleanup timeout): an acquisition's marker write
	// in flight must land before the markers are deleted, not after.
	s.claims.inflight.Wait()
	// A clean end: the lock-delay markers go before the keys (see
	// WithLockDelay). Should this fail, the next holder waits the delay.
	// After Abandon the end was unclean, whatever came before it: a
	// Release that failed, whose marker Close would otherwise delete,
	// does not make it clean.
	var markersErr error
	if !s.ledger.abandoned.Load() {
		if markersErr = s.deleteMarkers(ctx, beforeRevoke(held)); markersErr != nil {
			s.log.Warn("could not delete the lock-delay markers; the next holders wait the delay", zap.Error(markersErr))
		}
	}
	// etcd answered that the lease is gone (ErrLeaseRevoked or
	// ErrLeaseExpired): there is nothing to revoke, and asking would only
	// make the client log a warning.
	if err := s.Err(); !errors.Is(err, ErrLeaseRevoked) && !errors.Is(err, ErrLeaseExpired) {
		_, err := retried(ctx, s.client, nil, func(ctx context.Context) (*clientv3.LeaseRevokeResponse, error) {
			resp, err := s.client.Revoke(ctx, s.keeper.id)
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				err = nil // revoked already, by an earlier try or someone else, or expired
			}
			return resp, err
		})
		if err != nil {
			return fmt.Errorf("lock: revoke lease: %w", err)
		}
	}
	// The lease is gone: a marker delete compares its key, so none could
	// succeed from now on.
	s.ledger.revoked.Store(true)
	if markersErr != nil {
		return fmt.Errorf("lock: %w: %w", ErrMarkersKept, markersErr)
	}
	return nil
}

// Abandon stops renewing without revoking the lease: every lock the session
// holds ends with ErrReleased, but its keys stay until the lease expires,
// an unclean end for WithLockDelay; an acquisition in progress returns
// ErrSessionClosed. Close may still be called to revoke.
func (s *Session) Abandon() {
	s.ledger.abandoned.Store(true)
	s.end(ErrSessionClosed, true)
	s.wg.Wait()
}

// lostErr returns the session's *LostError once it is lost to its
// deadline, else nil (also after Close, or a loss etcd answered for).
// The lease, renewed no more, then takes the session's keys; after a
// revoke, Break may have moved them to a lease of its own, which only a
// Release frees early.
func (s *Session) lostErr() error {
	if err := s.Err(); errors.Is(err, ErrSessionLost) && errors.Is(err, ErrDeadlinePassed) {
		return err
	}
	return nil
}

// untilLost returns ctx, canceled also when the session is lost, and its
// stop function.
func (s *Session) untilLost(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(s.alive, func() {
		if err := s.lostErr(); err != nil {
			cancel(err)
		}
	})
	return ctx, func() {
		stop()
		cancel(nil)
	}
}

// lose ends the session with a LostError unless it has already ended.
func (s *Session) lose(cause, detail error) {
	s.end(&LostError{Kind: ErrSessionLost, Cause: cause, Detail: detail, At: s.cfg.clock.Now()}, false)
}

// end makes the session invalid. With release set, its claims become
// Released; otherwise they are lost with err as the cause.
func (s *Session) end(err error, release bool) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	s.err = err
	s.keeper.end()
	claims := s.claims.all()
	s.mu.Unlock()
	defer func() {
		for _, l := range claims {
			s.unclaim(l)
		}
	}()

	// Mark every lock before canceling the contexts they derive from, so
	// that a holder woken by its context already sees the final state.
	for _, l := range claims {
		if release {
			rerr := ErrReleased
			if l.currentState() == stateAcquiring {
				rerr = err // the pending Acquire fails with ErrSessionClosed
			}
			l.finish(stateReleased, rerr)
		} else {
			l.finish(stateLost, &LostError{Kind: ErrLost, Cause: err, At: s.cfg.clock.Now()})
		}
	}
	s.cancel(err)
	if lost := (*LostError)(nil); errors.As(err, &lost) {
		s.log.Warn("session lost", zap.Error(err))
	}
}
