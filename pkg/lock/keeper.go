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

	"github.com/etcdlock/etcdlock/pkg/clock"
	"github.com/etcdlock/etcdlock/pkg/lease"
)

// keeper keeps a session's lease: the grant (grant), the renewals
// (Session.renewLoop, keeper.renew) and the conservative deadline they
// move, which Session.watchdog enforces. See "The deadline" in DESIGN.md.
type keeper struct {
	client *clientv3.Client
	clock  clock.Clock
	id     clientv3.LeaseID
	ttl    time.Duration // granted by etcd
	margin time.Duration
	every  time.Duration // renewal interval

	// mu guards what follows. It is taken alone or under Session.mu, and
	// nothing else is taken under it.
	mu       sync.Mutex
	deadline time.Time
	lastErr  error // last renewal error since the last success
	ended    bool  // the session ended: the deadline moves no more
}

// grant grants the session's lease and returns its keeper, with the
// deadline counted from the grant's send time. A grant answered only
// after the deadline it would have (a cluster that elected a leader in
// the meantime, a network slower than the TTL) is revoked and sent again
// while ctx lasts, DefaultTimeout without a deadline: a session is never
// returned lost. At ctx's end the error wraps ErrUnavailable and ctx's
// error.
func grant(ctx context.Context, client *clientv3.Client, cfg config) (*keeper, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	for {
		k, err := grantOnce(ctx, client, cfg)
		if !errors.Is(err, errGrantedLate) {
			return k, err
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: %w", err, ctx.Err())
		}
	}
}

// errGrantedLate: a lease grant was answered after the deadline it would
// have had; the lease is revoked.
var errGrantedLate = errors.New("the lease grant was answered past its deadline (etcd without a leader, or a network slower than the TTL)")

// grantOnce grants a lease, sending the grant again while a member holds
// it unanswered, and returns its keeper; errGrantedLate, with
// ErrUnavailable, if the answer came after the lease's deadline.
func grantOnce(ctx context.Context, client *clientv3.Client, cfg config) (*keeper, error) {
	// A grant is sent again if a member holds it unanswered: a lease whose
	// reply was lost has no keys, and expires by its TTL.
	// Each try keeps its own send time: the deadline counts from the one
	// that was answered.
	type granted struct {
		*clientv3.LeaseGrantResponse
		send time.Time
	}
	g, err := retried(ctx, client, nil, func(ctx context.Context) (granted, error) {
		send := cfg.clock.Now()
		resp, err := client.Grant(ctx, lease.Seconds(cfg.ttl))
		return granted{resp, send}, err
	})
	if err != nil {
		return nil, fmt.Errorf("lock: grant lease: %w", err)
	}
	resp, send := g.LeaseGrantResponse, g.send
	ttl := time.Duration(resp.TTL) * time.Second
	k := &keeper{client: client, clock: cfg.clock, id: resp.ID, ttl: ttl, margin: cfg.safetyMargin(ttl), every: cfg.renewInterval}
	if k.every == 0 {
		k.every = ttl / 3
	}
	revoke := func() {
		revokeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.cleanupTimeout)
		defer cancel()
		_, _ = client.Revoke(revokeCtx, resp.ID)
	}
	// Compared without adding the two, which could overflow.
	if k.margin >= ttl || k.every >= ttl-k.margin {
		revoke()
		return nil, invalid("renew interval %v + safety margin %v must be below the granted TTL %v", k.every, k.margin, ttl)
	}
	k.deadline = lease.Deadline(send, ttl, k.margin)
	if now := cfg.clock.Now(); !now.Before(k.deadline) {
		revoke()
		return nil, fmt.Errorf("lock: grant lease: %w: %w: answered %v after it was sent, TTL %v", ErrUnavailable, errGrantedLate, now.Sub(send).Round(time.Millisecond), ttl)
	}
	return k, nil
}

// lastDeadline returns the deadline and the last renewal error since the
// last success.
func (k *keeper) lastDeadline() (time.Time, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.deadline, k.lastErr
}

// end stops the deadline from moving: loss is final.
func (k *keeper) end() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.ended = true
}

// failed records a failed renewal.
func (k *keeper) failed(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.lastErr = err
}

// renewed records a successful renewal sent at send. A reply that arrives
// after the session ended changes nothing: loss is final.
func (k *keeper) renewed(send time.Time, ttl time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ended {
		return
	}
	k.lastErr = nil
	if d := lease.Deadline(send, ttl, k.margin); d.After(k.deadline) {
		k.deadline = d
	}
}

// watchdog ends the session when the deadline passes, independently of
// any renewal in flight: a renewal blocked on a dead connection cannot
// delay the loss. It sleeps until the deadline it last saw; if a renewal
// moved the deadline meanwhile, it sleeps again.
func (s *Session) watchdog() {
	defer s.wg.Done()
	for {
		deadline, detail := s.keeper.lastDeadline()
		left := deadline.Sub(s.cfg.clock.Now())
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
// the deadline ends the session. After each renewal it sweeps the
// session's leftovers (ledger).
func (s *Session) renewLoop() {
	defer s.wg.Done()
	k := s.keeper
	t := s.cfg.clock.NewTimer(k.every)
	defer t.Stop()
	for {
		select {
		case <-s.alive.Done():
			return
		case <-s.ledger.sweepNow:
			s.sweepLeftovers()
			continue
		case <-t.C():
		}
		send := s.cfg.clock.Now()
		_, lastErr := k.lastDeadline()
		resp, err := k.renew(s.alive, &s.wg, lastErr != nil)
		if s.alive.Err() != nil {
			return
		}
		s.cfg.metrics.LeaseRenewed(s.cfg.clock.Since(send), err)
		switch {
		case err == nil:
			s.log.Debug("renewed", zap.Duration("rtt", s.cfg.clock.Since(send)))
			k.renewed(send, time.Duration(resp.TTL)*time.Second)
			t.Reset(max(k.every-s.cfg.clock.Since(send), 0))
			s.sweepLeftovers()
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			s.leaseGone(err)
			return
		default:
			k.failed(err)
			s.log.Warn("lease renewal failed; retrying until the deadline", zap.Error(err), zap.Duration("remaining", s.remaining()))
			t.Reset(min(k.every/4, 250*time.Millisecond))
		}
	}
}

// renewAttempts is how many renewal requests one renewal may have in
// flight at once (see renew).
const renewAttempts = 3

// renew renews the lease once, within one renewal interval, under alive,
// which is canceled at the deadline, so that no renewal (nor
// KeepAliveOnce's internal retries) outlives it; its requests run on
// goroutines counted in wg. A member that cannot reach the leader, or
// that is frozen, may hold a request unanswered: each third of the
// interval without an answer, another request goes out beside the first,
// on a new stream, which the client's balancer sends to its next
// endpoint, up to renewAttempts. A retry (the last renewal failed) sends
// all of them at once: the balancer's picks are shared by every request
// of the client, so a request now and then lands on the same member as
// the one before, and after a failure the time left may fit one round
// only. The first answer wins. A renewal is idempotent: repeating it is
// safe. (Not under clientv3.WithRequireLeader: KeepAliveOnce retries a
// refusal at once, so a member without a leader would be asked in a
// tight loop.)
func (k *keeper) renew(alive context.Context, wg *sync.WaitGroup, retry bool) (*clientv3.LeaseKeepAliveResponse, error) {
	ctx, cancel := context.WithTimeout(alive, k.every)
	defer cancel()
	type reply struct {
		resp *clientv3.LeaseKeepAliveResponse
		err  error
	}
	replies := make(chan reply, renewAttempts)
	send := func() {
		wg.Add(1) // renewLoop holds the group's count: no race with Wait
		go func() {
			defer wg.Done()
			resp, err := k.client.KeepAliveOnce(ctx, k.id)
			replies <- reply{resp, err}
		}()
	}
	hedge := time.NewTicker(k.every / renewAttempts)
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
