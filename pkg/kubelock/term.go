package kubelock

import (
	"context"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/internal/backoff"
	"github.com/etcdlock/etcdlock/pkg/internal/watchmux"
)

// term is one term of this lock's identity as the record's holder.
type term struct {
	token   fencing.Token
	lease   clientv3.LeaseID
	started time.Time
	// transitions is the record's LeaderTransitions: the terms before it.
	transitions int
	ctx         context.Context
	cancel      context.CancelCauseFunc

	// Guarded by Lock.mu.
	deadline time.Time // conservative: before etcd could expire the lease
	renewals int64
	ended    time.Time
	onEnd    []context.CancelCauseFunc // RunContext's armed on this term
}

// startTerm starts a term whose record was created at revision rev, and
// its watcher. l.mu is held.
func (l *Lock) startTerm(lease clientv3.LeaseID, rev int64, deadline time.Time, transitions int) {
	ctx, cancel := context.WithCancelCause(context.Background())
	t := &term{
		token:       fencing.Token(rev),
		transitions: transitions,
		lease:       lease,
		started:     time.Now(),
		ctx:         ctx,
		cancel:      cancel,
		deadline:    deadline,
	}
	l.term, l.last = t, t
	l.observed, l.read = observation{exists: true, modRev: rev, lease: lease}, true
	l.wg.Add(2)
	go l.enforceDeadline(t)
	go l.watch(t, rev+1)
	l.logger.Info("term started", zap.Int64("token", rev), zap.String("lease", leaseHex(lease)))
}

// end ends t with cause and revokes its lease in the background.
func (l *Lock) end(t *term, cause error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.endLocked(t, cause, true)
}

// endLocked ends t: its context is canceled before any write that could
// let another candidate in is sent. revoke revokes its lease in the
// background; callers that revoke it themselves pass false. l.mu is held.
func (l *Lock) endLocked(t *term, cause error, revoke bool) {
	if !t.ended.IsZero() {
		return
	}
	t.ended = time.Now()
	t.cancel(cause)
	for _, cancel := range t.onEnd {
		cancel(cause)
	}
	t.onEnd = nil
	if l.term == t {
		l.term = nil
	}
	if revoke && !l.closed {
		l.revokeLaterLocked(t.lease)
	}
	l.logger.Info("term ended", zap.Int64("token", int64(t.token)), zap.NamedError("cause", cause))
}

// enforceDeadline ends t when its deadline passes without a renewal. It
// returns when t ends.
func (l *Lock) enforceDeadline(t *term) {
	defer l.wg.Done()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		l.mu.Lock()
		left := time.Until(t.deadline)
		l.mu.Unlock()
		if left <= 0 {
			l.end(t, ErrDeadline)
			return
		}
		timer.Reset(left)
		select {
		case <-t.ctx.Done():
			return
		case <-timer.C:
		}
	}
}

// watch ends t when etcd shows its record deleted or under another lease.
// It returns when t ends. Its watch goes over a watch stream of its own
// (the library's one watch path, pkg/internal/watchmux): opened with
// clientv3.WithRequireLeader, so that a member cut off from the others
// ends it instead of staying silent; asked for progress when it is silent;
// reopened with backoff. A watch that breaks, or whose start revision was
// compacted, is followed by a read of the record.
func (l *Lock) watch(t *term, from int64) {
	defer l.wg.Done()
	mux, ran := watchmux.ForClient(l.client, l.logger), make(chan struct{})
	go func() {
		defer close(ran)
		mux.Run(t.ctx)
	}()
	defer func() { <-ran }()
	retry := backoff.Backoff{Min: 100 * time.Millisecond, Max: 2 * time.Second, Jitter: true}
	for t.ctx.Err() == nil {
		feed := mux.Feed(watchmux.Range{Key: l.key, Rev: from, Puts: true})
		next, read := l.follow(t, feed, from)
		feed.Close()
		from = next
		if read {
			retry.Reset()
		} else {
			_ = backoff.Sleep(t.ctx, retry.Next())
		}
	}
}

// follow takes the watch's updates until it ends or t ends, and returns
// the revision to watch from next; read is false when the watch ended and
// the record could not be read.
func (l *Lock) follow(t *term, feed *watchmux.Feed, from int64) (next int64, read bool) {
	for {
		select {
		case <-feed.Ready():
		case <-t.ctx.Done():
			return from, true
		}
		u, ok := feed.Take()
		if !ok {
			continue
		}
		for _, ev := range u.Events {
			from = ev.Kv.ModRevision + 1
			if ev.Type == mvccpb.DELETE || clientv3.LeaseID(ev.Kv.Lease) != t.lease {
				l.end(t, ErrRecordGone)
				return from, true
			}
		}
		switch {
		case u.Err != nil:
			// The record cannot be watched: the term could end unseen.
			l.end(t, u.Err)
			return from, true
		case u.Ended:
			if next, ok := l.reread(t); ok {
				return max(from, next), true
			}
			return from, false
		}
	}
}

// reread reads the record after its watch ended: it ends t if the
// record is gone or under another lease, and returns the revision to watch
// from; ok is false if the read failed.
func (l *Lock) reread(t *term) (from int64, ok bool) {
	ctx, cancel := context.WithTimeout(t.ctx, l.cfg.cleanup)
	defer cancel()
	resp, err := l.client.Get(ctx, l.key)
	if err != nil {
		return 0, false
	}
	if len(resp.Kvs) == 0 || clientv3.LeaseID(resp.Kvs[0].Lease) != t.lease {
		l.end(t, ErrRecordGone)
	}
	return resp.Header.Revision + 1, true
}

func leaseHex(id clientv3.LeaseID) string { return strconv.FormatInt(int64(id), 16) }

// parseLease reads a lease ID written by leaseHex; anything else (a term
// count written before the count carried the lease) is 0.
func parseLease(b []byte) clientv3.LeaseID {
	id, err := strconv.ParseInt(string(b), 16, 64)
	if err != nil {
		return 0
	}
	return clientv3.LeaseID(id)
}

// Term is a term of this lock's identity as the record's holder.
type Term struct{ t *term }

// Token is the term's fencing token: the etcd revision at which this
// identity created the record. Every later term of the election, of any
// candidate, has a larger token.
// The zero Term (returned with ErrNoTerm) has token 0.
func (t Term) Token() fencing.Token {
	if t.t == nil {
		return 0
	}
	return t.t.token
}

// Context is canceled when the term ends; context.Cause says why:
// ErrDeadline, ErrRecordGone, ErrReleased, ErrStoppedLeading,
// ErrConcurrentElectors or ErrClosed.
// The zero Term's is canceled already, with cause ErrNoTerm.
func (t Term) Context() context.Context {
	if t.t == nil {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(ErrNoTerm)
		return ctx
	}
	return t.t.ctx
}

// Started is when the record was created; the zero time for the zero
// Term.
func (t Term) Started() time.Time {
	if t.t == nil {
		return time.Time{}
	}
	return t.t.started
}

// Term returns the latest term of this lock, which may have ended (its
// Context is then done), or ErrNoTerm if none has started.
func (l *Lock) Term() (Term, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		return Term{}, ErrNoTerm
	}
	return Term{l.last}, nil
}

// Bind returns a context that ends when parent does or when the term
// ends, whichever is first, and carries parent's values. The term's end
// cancels it synchronously, before the lock sends any write that could let
// another candidate in. Call cancel when done with it.
func (t Term) Bind(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(valuesFrom{t.Context(), parent})
	if err := parent.Err(); err != nil {
		cancel(context.Cause(parent))
		return ctx, func() {}
	}
	stop := context.AfterFunc(parent, func() { cancel(context.Cause(parent)) })
	return ctx, func() { stop(); cancel(context.Canceled) }
}

// Lead adapts run to client-go's OnStartedLeading: run gets the term of
// the elector's latest "became leader" and its context bound to client-go's
// (Term.Bind), which carries the term (TermFrom). A callback that runs after client-go's context ended — the
// scheduler ran it late, after the elector lost — gets a done context.
func (l *Lock) Lead(run func(ctx context.Context, t Term)) func(context.Context) {
	return func(parent context.Context) {
		l.mu.Lock()
		led := l.led
		l.mu.Unlock()
		if led == nil {
			// client-go started leading without a Create of this lock.
			ctx, cancel := context.WithCancelCause(parent)
			cancel(ErrNoTerm)
			t := Term{&term{ctx: ctx}}
			run(context.WithValue(ctx, termKey{}, t), t)
			return
		}
		t := Term{led}
		ctx, cancel := t.Bind(context.WithValue(parent, termKey{}, t))
		defer cancel()
		run(ctx, t)
	}
}

// valuesFrom is a context that is done with Context and looks values up
// in Context, then in values.
type valuesFrom struct {
	context.Context
	values context.Context
}

func (v valuesFrom) Value(key any) any {
	if x := v.Context.Value(key); x != nil {
		return x
	}
	return v.values.Value(key)
}
