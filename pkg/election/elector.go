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
	clock   lock.Clock // the session's, on which Deadline is a time
}

// Deadline returns the conservative lease deadline: the term is valid only
// before it. It moves forward with every successful renewal.
func (t Term) Deadline() time.Time { return t.lock.Deadline() }

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
		l, err := s.Acquire(ctx, e.cfg.Name)
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

// lead runs one term and reports whether the lease must be left to expire
// (Run's context ended without ReleaseOnCancel).
func (e *Elector) lead(ctx context.Context, s *lock.Session, l *lock.Lock, log *zap.Logger) (keepLease bool) {
	term := &Term{Name: e.cfg.Name, Identity: e.cfg.Identity, Token: l.Token(), Key: l.Key(), Started: time.Now(), lock: l, clock: s.Clock()}
	e.mu.Lock()
	e.term = term
	e.mu.Unlock()
	e.metrics.StartedLeading()
	log.Info("started leading", zap.Stringer("token", term.Token))

	done := make(chan struct{})
	go func() {
		defer close(done)
		e.cfg.Callbacks.OnStartedLeading(l.Context(), *term)
	}()
	release := func() {
		rctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := l.Release(rctx); err != nil {
			log.Warn("resign failed; the lease will expire", zap.Error(err))
		}
	}
	select {
	case <-done:
		log.Info("OnStartedLeading returned while leading: resigning")
		release()
	case <-l.Context().Done():
	case <-ctx.Done():
		if e.cfg.ReleaseOnCancel {
			release()
		} else {
			s.Abandon()
			keepLease = true
		}
	}
	<-done
	var lost error
	if errors.Is(l.Err(), lock.ErrLost) {
		lost = l.Err()
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
