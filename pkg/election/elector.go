package election

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/internal/backoff"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// ErrRunning is returned by Run when the Elector is already running.
var ErrRunning = errors.New("election: already running")

// cleanupTimeout bounds each clean-up the elector runs on a fresh context,
// because the context it would otherwise use may have ended: a resign
// (Lock.Release) and the close of a session (Session.Close, which revokes
// its lease). It is lock's default, so that the elector's clean-ups and
// its session's are bounded alike. A clean-up cut short only delays the
// handover: the leader key still goes away when its lease expires.
const cleanupTimeout = lock.DefaultCleanupTimeout

// Term is one period of leadership.
type Term struct {
	Name     string
	Identity string
	// Token fences the leader's writes: it is strictly larger than the
	// token of every earlier term of this election.
	Token   fencing.Token
	Key     string    // the leader key in etcd
	Started time.Time // when this candidate became leader
	lock    *lock.Lock
	confirm *confirmer // nil for an elector without the handover delay
	clock   lock.Clock // the session's, on which Deadline is a time
}

// Deadline returns the term's conservative deadline: the term is valid
// only before it. It is the earlier of the lease's deadline, which every
// successful renewal moves forward, and the leader key's, which every
// successful confirmation of the key moves forward (see the package doc).
func (t Term) Deadline() time.Time {
	d := t.lock.Deadline()
	if t.confirm != nil {
		if c := t.confirm.Deadline(); c.Before(d) {
			return c
		}
	}
	return d
}

// Elector campaigns for one election. Create it with New and call Run.
type Elector struct {
	cfg     Config
	metrics Metrics // cfg.Metrics, or a no-op
	running atomic.Bool

	mu   sync.Mutex
	term *Term // current term, nil when not leading
}

// New validates cfg and fills in defaults.
func New(cfg Config) (*Elector, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	e := &Elector{cfg: cfg, metrics: cfg.Metrics}
	if e.metrics == nil {
		e.metrics = nopMetrics{}
	}
	return e, nil
}

// Identity returns this candidate's identity.
func (e *Elector) Identity() string { return e.cfg.Identity }

// IsLeader reports whether a term of this Elector is in progress.
func (e *Elector) IsLeader() bool { return e.Term() != nil }

// Term returns the current term, or nil when not leading.
func (e *Elector) Term() *Term {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.term
}

// Run campaigns until ctx ends, running a term each time it wins, and
// campaigns again after every term. It retries etcd errors with backoff. It
// returns nil once ctx has ended and the last term's callbacks have
// returned, or ErrRunning if Run is already running.
func (e *Elector) Run(ctx context.Context) error {
	if !e.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer e.running.Store(false)
	log := e.cfg.Logger.With(zap.String("election", e.cfg.Name), zap.String("identity", e.cfg.Identity))

	var wg sync.WaitGroup
	obsCtx, stopObs := context.WithCancel(ctx)
	defer func() { stopObs(); wg.Wait() }()
	if e.cfg.Callbacks.OnNewLeader != nil {
		leaders, err := Observe(obsCtx, e.cfg.Client, e.cfg.Name, lock.WithPrefix(e.cfg.Prefix))
		if err != nil {
			return err // not reached: New validated the name and prefix
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := ""
			for l := range leaders {
				if l.Identity != "" && l.Identity != last {
					last = l.Identity
					e.cfg.Callbacks.OnNewLeader(l.Identity)
				}
			}
		}()
	}

	var s *lock.Session
	keepLease := false
	defer func() {
		if s == nil || keepLease {
			return
		}
		cctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		_ = s.Close(cctx)
	}()
	retry := backoff.Backoff{Min: e.cfg.RetryMin, Max: e.cfg.RetryMax}
	for ctx.Err() == nil {
		if s == nil || s.Err() != nil {
			if s != nil {
				cctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
				_ = s.Close(cctx)
				cancel()
			}
			var err error
			s, err = lock.NewSession(ctx, e.cfg.Client, e.cfg.sessionOptions(log)...)
			if err != nil {
				s = nil
				if ctx.Err() == nil {
					d := retry.Next()
					log.Warn("cannot start a session; retrying", zap.Error(err), zap.Duration("backoff", d))
					_ = backoff.Sleep(ctx, d)
				}
				continue
			}
		}
		l, err := s.Acquire(ctx, e.cfg.Name, e.acquireOptions(s)...)
		if err != nil {
			if ctx.Err() == nil {
				d := retry.Next()
				log.Warn("campaign failed; retrying", zap.Error(err), zap.Duration("backoff", d))
				_ = backoff.Sleep(ctx, d)
			}
			continue
		}
		retry.Reset()
		keepLease = e.lead(ctx, s, l, log)
	}
	return nil
}

// acquireOptions are the options of a campaign on session s: the
// handover delay, one TTL (see the package doc).
func (e *Elector) acquireOptions(s *lock.Session) []lock.AcquireOption {
	if e.cfg.noHandoverDelay {
		return nil
	}
	return []lock.AcquireOption{lock.WithLockDelay(s.TTL())}
}

// lead runs one term of l, won on session s, and reports whether the lease
// must be left to expire (Run's context ended without ReleaseOnCancel).
// The term starts once the key is confirmed.
func (e *Elector) lead(ctx context.Context, s *lock.Session, l *lock.Lock, log *zap.Logger) (keepLease bool) {
	release := func() {
		rctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := l.Release(rctx); err != nil {
			log.Warn("resign failed; the lease will expire", zap.Error(err))
		}
	}
	stop := func() (keepLease bool) {
		if e.cfg.ReleaseOnCancel {
			release()
			return false
		}
		s.Abandon()
		return true
	}
	var c *confirmer
	if !e.cfg.noHandoverDelay {
		c = newConfirmer(s, l, s.TTL(), e.cfg.confirm, log)
		if err := c.first(ctx); err != nil {
			if ctx.Err() != nil {
				return stop()
			}
			log.Warn("lost the leader key before the term started", zap.Error(err))
			return false
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait() // after endTerm: the confirmer returns once the term ends
	termCtx, endTerm := context.WithCancelCause(l.Context())
	defer endTerm(nil)
	if c != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.run(termCtx, endTerm)
		}()
	}
	term := &Term{Name: e.cfg.Name, Identity: e.cfg.Identity, Token: l.Token(), Key: l.Key(), Started: time.Now(), lock: l, confirm: c, clock: s.Clock()}
	e.mu.Lock()
	e.term = term
	e.mu.Unlock()
	e.metrics.StartedLeading()
	log.Info("started leading", zap.Stringer("token", term.Token))

	done := make(chan struct{})
	go func() {
		defer close(done)
		e.cfg.Callbacks.OnStartedLeading(termCtx, *term)
	}()
	select {
	case <-done:
		log.Info("OnStartedLeading returned while leading: resigning")
		release()
	case <-termCtx.Done():
		if l.Err() == nil {
			// The key's deadline passed (the confirmer ended the term)
			// while the lock still holds: a clean end, now that the
			// term's context has ended.
			release()
		}
	case <-ctx.Done():
		keepLease = stop()
	}
	<-done
	lost := termLost(termCtx, l)
	if lost != nil {
		log.Warn("lost leadership", zap.Error(lost))
	}
	e.mu.Lock()
	e.term = nil
	e.mu.Unlock()
	e.metrics.StoppedLeading(lost)
	if e.cfg.Callbacks.OnStoppedLeading != nil {
		e.cfg.Callbacks.OnStoppedLeading()
	}
	log.Info("stopped leading", zap.Stringer("token", term.Token))
	return keepLease
}

// Resign ends the current term, if any: the leader key is deleted with a
// compare-and-delete so the next candidate takes over at once, and
// OnStartedLeading's context is canceled. The elector then campaigns again
// (cancel Run's context to stop campaigning). Resign without a term does
// nothing. Resign ends the term current when it is called: a Resign that
// failed still ended its term, so retrying it would end the next term,
// whose token is new — check Term first if that is not what you want.
func (e *Elector) Resign(ctx context.Context) error {
	t := e.Term()
	if t == nil {
		return nil
	}
	return t.lock.Release(ctx)
}
