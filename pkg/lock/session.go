package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/pkg/clock"
	"github.com/etcdlock/etcdlock/pkg/internal/watchmux"
	"github.com/etcdlock/etcdlock/pkg/lease"
)

// Session is one etcd lease, renewed in the background, under which locks
// are acquired. Its methods are safe for concurrent use.
//
// Its deadline is conservative: the send time of the last successful
// renewal + granted TTL − margin, before etcd can expire the lease. When
// it passes without a renewal, the session and every lock it holds are
// lost at once, locally, without waiting for any reply. Loss is final.
// Close stops its goroutines and waits for them (DESIGN.md, "The
// deadline").
type Session struct {
	client *clientv3.Client
	cfg    config
	log    *zap.Logger
	lease  clientv3.LeaseID
	ttl    time.Duration // granted by etcd
	margin time.Duration
	every  time.Duration // renewal interval

	// alive is canceled, with the loss or close error as its cause, the
	// moment the session stops being valid. Every lock's context derives
	// from it, and renewals run under it so none outlives the deadline.
	alive  context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup
	mux    *watchmux.Mux // every key watch of the session's locks and waiters

	// mu guards what follows. Lock order: Session.mu, then Lock.mu, then
	// the Mux's own mutex (Session.watchKey takes all three).
	mu       sync.Mutex
	deadline time.Time
	lastErr  error // last renewal error since the last success
	err      error // nil while valid
	done     chan struct{}
	claims   map[string]*Lock
	// busyNames are semaphores' names whose last acquisition on this
	// session found keys under them (see slotHold.queue).
	busyNames map[string]struct{}
	seq       uint64 // acquisitions so far (keyspace.Record.Seq)
	strays    []stray
	sweepNow  chan struct{} // wakes the renewal loop to sweep strays at once
	// abandoned is set by Abandon: its locks' keys must stay until the
	// lease expires, and no later Release deletes them.
	abandoned atomic.Bool
	// revoked is set by the Close whose revoke succeeded (or found the
	// lease gone): a later Close has nothing left to do.
	revoked atomic.Bool
	// unreleased are locks with a lock-delay marker whose Release, or
	// failed acquisition's clean-up, could not delete it (keepForClose),
	// for Close to delete their markers (guarded by mu).
	unreleased []*Lock
	// inflight counts the acquisitions in progress (claim to return):
	// Close waits for them, so that none writes a marker after Close
	// deleted the markers.
	inflight sync.WaitGroup
}

// NewSession grants a lease and starts renewing it. ctx bounds only the
// grant. The client must outlive the session.
func NewSession(ctx context.Context, client *clientv3.Client, opts ...SessionOption) (*Session, error) {
	if err := validateClient(client); err != nil {
		return nil, err
	}
	cfg, err := newSessionConfig(opts)
	if err != nil {
		return nil, err
	}
	send := cfg.clock.Now()
	resp, err := client.Grant(ctx, lease.Seconds(cfg.ttl))
	if err != nil {
		return nil, fmt.Errorf("lock: grant lease: %w", err)
	}
	ttl := time.Duration(resp.TTL) * time.Second
	margin := cfg.safetyMargin(ttl)
	every := cfg.renewInterval
	if every == 0 {
		every = ttl / 3
	}
	// Compared without adding the two, which could overflow.
	if margin >= ttl || every >= ttl-margin {
		revokeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.cleanupTimeout)
		defer cancel()
		_, _ = client.Revoke(revokeCtx, resp.ID)
		return nil, invalid("renew interval %v + safety margin %v must be below the granted TTL %v", every, margin, ttl)
	}
	s := &Session{
		client:   client,
		cfg:      cfg,
		log:      cfg.logger.With(zap.String("lease", fmt.Sprintf("%x", int64(resp.ID)))),
		lease:    resp.ID,
		ttl:      ttl,
		margin:   margin,
		every:    every,
		done:     make(chan struct{}),
		claims:   make(map[string]*Lock),
		sweepNow: make(chan struct{}, 1),
	}
	s.alive, s.cancel = context.WithCancelCause(context.Background())
	s.deadline = lease.Deadline(send, ttl, margin)
	// The mux carries every watch of the session over one stream. Its
	// delays and retries run on the real clock, whatever the session's
	// clock: they pace requests to etcd, while the session's clock
	// (WithClock) measures the lease deadline.
	s.mux = watchmux.ForClient(client, s.log)
	s.wg.Add(3)
	go s.renewLoop(send)
	go s.watchdog()
	go func() {
		defer s.wg.Done()
		s.mux.Run(s.alive)
	}()
	s.log.Debug("session started", zap.Duration("granted-ttl", ttl), zap.Duration("margin", margin), zap.Duration("renew-every", every))
	return s, nil
}

// Lease returns the session's etcd lease ID.
func (s *Session) Lease() clientv3.LeaseID { return s.lease }

// TTL returns the TTL etcd granted (which may exceed the one requested).
func (s *Session) TTL() time.Duration { return s.ttl }

// Client returns the etcd client the session uses.
func (s *Session) Client() *clientv3.Client { return s.client }

// Deadline returns the conservative deadline: the session is valid only
// strictly before it. The server cannot expire the lease earlier than
// Deadline plus the safety margin.
func (s *Session) Deadline() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deadline
}

// SafetyMargin returns the margin between Deadline and the earliest moment
// etcd could expire the lease (Deadline + SafetyMargin = send time of the
// last successful renewal + TTL).
func (s *Session) SafetyMargin() time.Duration { return s.margin }

// Clock returns the session's time source (the one given to WithClock, else
// the real clock): Deadline, and the deadlines of its locks, are times on
// this clock.
func (s *Session) Clock() clock.Clock { return s.cfg.clock }

// remaining is the time left until Deadline, or 0 once the session is
// lost or closed.
func (s *Session) remaining() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return 0
	}
	return max(s.deadline.Sub(s.cfg.clock.Now()), 0)
}

// Done returns a channel closed when the session is lost or closed.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err returns nil while the session is valid, ErrSessionClosed after Close,
// and a *LostError wrapping ErrSessionLost after a loss.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close releases every lock the session holds (their state becomes
// Released), stops renewing, waits for the session's goroutines, and revokes
// the lease, which deletes the session's keys at once. It returns the revoke
// error, if any (the lease then expires on its own), or one wrapping
// ErrMarkersKept if the lock-delay markers of its clean ends could not be
// deleted (DESIGN.md, "Lock-delay"). Calling it again, or after a loss, is
// safe: it retries what failed, or returns nil once the lease is revoked.
func (s *Session) Close(ctx context.Context) error {
	if s.revoked.Load() {
		return nil // an earlier Close did all there is to do
	}
	s.mu.Lock()
	held := append([]*Lock(nil), s.unreleased...)
	for _, l := range s.claims {
		held = append(held, l)
	}
	s.mu.Unlock()
	s.end(ErrSessionClosed, true)
	s.wg.Wait()
	// The acquisitions in progress, which end canceled them, finish their
	// clean-up (within the cleanup timeout): an acquisition's marker write
	// in flight must land before the markers are deleted, not after.
	s.inflight.Wait()
	// A clean end: the lock-delay markers go before the keys (see
	// WithLockDelay). Should this fail, the next holder waits the delay.
	// After Abandon the end was unclean, whatever came before it: a
	// Release that failed, whose marker Close would otherwise delete,
	// does not make it clean.
	var markersErr error
	if !s.abandoned.Load() {
		if markersErr = s.deleteMarkers(ctx, beforeRevoke(held)); markersErr != nil {
			s.log.Warn("could not delete the lock-delay markers; the next holders wait the delay", zap.Error(markersErr))
		}
	}
	_, err := s.client.Revoke(ctx, s.lease)
	if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("lock: revoke lease: %w", err)
	}
	// The lease is gone: a marker delete compares its key, so none could
	// succeed from now on.
	s.revoked.Store(true)
	if markersErr != nil {
		return fmt.Errorf("lock: %w: %w", ErrMarkersKept, markersErr)
	}
	return nil
}

// Abandon stops renewing without revoking the lease: every lock the session
// holds becomes Released at once, but its keys stay until the lease
// expires, so no one else acquires those names before the TTL runs out,
// and the end is unclean for WithLockDelay. An acquisition in progress
// returns ErrSessionClosed. Close may still be called to revoke.
func (s *Session) Abandon() {
	s.abandoned.Store(true)
	s.end(ErrSessionClosed, true)
	s.wg.Wait()
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
	close(s.done)
	claims := make([]*Lock, 0, len(s.claims))
	for _, l := range s.claims {
		claims = append(claims, l)
	}
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
			if l.State() == stateAcquiring {
				rerr = err // the pending Acquire fails with ErrSessionClosed
			}
			l.finish(StateReleased, rerr)
		} else {
			l.finish(StateLost, &LostError{Kind: ErrLost, Cause: err, At: s.cfg.clock.Now()})
		}
	}
	s.cancel(err)
	if lost := (*LostError)(nil); errors.As(err, &lost) {
		s.log.Warn("session lost", zap.Error(err))
	}
}

// watchdog ends the session when the deadline passes, independently of
// any renewal in flight: a renewal blocked on a dead connection cannot
// delay the loss. It sleeps until the deadline it last saw; if a renewal
// moved the deadline meanwhile, it sleeps again.
func (s *Session) watchdog() {
	defer s.wg.Done()
	for {
		s.mu.Lock()
		left := s.deadline.Sub(s.cfg.clock.Now())
		detail := s.lastErr
		s.mu.Unlock()
		if left <= 0 {
			s.lose(ErrDeadlinePassed, detail)
			return
		}
		t := s.cfg.clock.NewTimer(left)
		select {
		case <-s.alive.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// renewLoop renews the lease every interval, measured from the send time
// of the last successful renewal; after a failure it retries quickly until
// the deadline ends the session.
func (s *Session) renewLoop(lastSend time.Time) {
	defer s.wg.Done()
	t := s.cfg.clock.NewTimer(s.every)
	defer t.Stop()
	for {
		select {
		case <-s.alive.Done():
			return
		case <-s.sweepNow:
			s.sweepStrays()
			continue
		case <-t.C():
		}
		send := s.cfg.clock.Now()
		s.mu.Lock()
		retry := s.lastErr != nil
		s.mu.Unlock()
		resp, err := s.renew(retry)
		if s.alive.Err() != nil {
			return
		}
		s.cfg.metrics.LeaseRenewed(s.cfg.clock.Since(send), err)
		switch {
		case err == nil:
			s.log.Debug("renewed", zap.Duration("rtt", s.cfg.clock.Since(send)))
			s.renewed(send, time.Duration(resp.TTL)*time.Second)
			lastSend = send
			t.Reset(max(s.every-s.cfg.clock.Since(lastSend), 0))
			s.sweepStrays()
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			s.leaseGone(err)
			return
		default:
			s.mu.Lock()
			s.lastErr = err
			s.mu.Unlock()
			s.log.Warn("lease renewal failed; retrying until the deadline", zap.Error(err), zap.Duration("remaining", s.remaining()))
			t.Reset(min(s.every/4, 250*time.Millisecond))
		}
	}
}

// renewAttempts is how many renewal requests one renewal may have in
// flight at once (see renew).
const renewAttempts = 3

// renew renews the lease once, within one renewal interval. alive is
// canceled at the deadline, so no renewal (nor KeepAliveOnce's internal
// retries) outlives it. A member that cannot reach the leader, or that is
// frozen, may hold a request unanswered: each third of the interval
// without an answer, another request goes out beside the first, on a new
// stream, which the client's balancer sends to its next endpoint, up to
// renewAttempts. A retry (the last renewal failed) sends all of them at
// once: the balancer's picks are shared by every request of the client,
// so a request now and then lands on the same member as the one before,
// and after a failure the time left may fit one round only. The first
// answer wins. A renewal is idempotent: repeating it is safe. (Not under
// clientv3.WithRequireLeader: KeepAliveOnce retries a refusal at once, so
// a member without a leader would be asked in a tight loop.)
func (s *Session) renew(retry bool) (*clientv3.LeaseKeepAliveResponse, error) {
	ctx, cancel := context.WithTimeout(s.alive, s.every)
	defer cancel()
	type reply struct {
		resp *clientv3.LeaseKeepAliveResponse
		err  error
	}
	replies := make(chan reply, renewAttempts)
	send := func() {
		s.wg.Add(1) // renewLoop holds the group's count: no race with Wait
		go func() {
			defer s.wg.Done()
			resp, err := s.client.KeepAliveOnce(ctx, s.lease)
			replies <- reply{resp, err}
		}()
	}
	hedge := time.NewTicker(s.every / renewAttempts)
	defer hedge.Stop()
	sent, answered := 1, 0
	if retry {
		sent = renewAttempts
	}
	for range sent {
		send()
	}
	for {
		select {
		case r := <-replies:
			answered++
			if r.err == nil || errors.Is(r.err, rpctypes.ErrLeaseNotFound) || answered == sent && (sent == renewAttempts || ctx.Err() != nil) {
				return r.resp, r.err
			}
		case <-hedge.C:
			if sent < renewAttempts {
				send()
				sent++
			}
		}
	}
}

// renewed records a successful renewal sent at send. A reply that arrives
// after the session ended changes nothing: loss is final.
func (s *Session) renewed(send time.Time, ttl time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return
	}
	s.lastErr = nil
	if d := lease.Deadline(send, ttl, s.margin); d.After(s.deadline) {
		s.deadline = d
	}
}
