package kubelock

// The record's writes: Create starts a term under a new etcd lease;
// Update renews it (each request tried again within Timings.CallTimeout
// while unanswered), or ends it and revokes its lease when the elector
// releases.

import (
	"context"
	"errors"
	"fmt"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/etcdlock/etcdlock/pkg/internal/backoff"
	"github.com/etcdlock/etcdlock/pkg/internal/rpccode"
	"github.com/etcdlock/etcdlock/pkg/lease"
)

// Create writes the record if there is none, under a new etcd lease, and
// starts a term (resourcelock.Interface). If a record exists, it returns
// an error for which apierrors.IsAlreadyExists is true. While the elector
// leads it returns ErrStillLeading instead: the record vanished under the
// elector's term, which has ended and must end for the elector too. While
// the etcd lease of the last record this lock saw under another holder is
// still alive — the record was deleted by hand, and that holder may not
// have noticed yet — it returns an error wrapping ErrHolderAlive: the
// holder revokes that lease once its term has ended, or etcd expires it.
func (l *Lock) Create(ctx context.Context, ler rl.LeaderElectionRecord) error {
	l.calls.Lock()
	defer l.calls.Unlock()
	ctx, cancel := context.WithTimeout(ctx, l.cfg.timings.CallTimeout())
	defer cancel()
	if err := l.checkHolder(ler); err != nil {
		return err
	}
	if err := l.checkOpen(); err != nil {
		return err
	}
	l.mu.Lock()
	closed, leading := l.closed, l.leaders > 0
	l.mu.Unlock()
	switch {
	case closed:
		return ErrClosed
	case leading:
		return ErrStillLeading
	}
	// The terms created so far are the new term's LeaderTransitions; the
	// count's version goes up with every Create, and the Create fails if
	// another came in between. Its value is the latest term's etcd lease,
	// which this Create waits for as for the holder of a record it saw: a
	// candidate that never saw the record still waits for its holder.
	count, err := l.client.Get(ctx, l.terms)
	if err != nil {
		return err
	}
	var terms int64
	var latest clientv3.LeaseID
	if len(count.Kvs) > 0 {
		terms = count.Kvs[0].Version
		latest = parseLease(count.Kvs[0].Value)
	}
	if err := l.waitHolder(ctx, latest); err != nil {
		if errors.Is(err, ErrHolderAlive) {
			// A record that still exists is reported as such, as client-go
			// expects of Create.
			if get, gerr := l.client.Get(ctx, l.key); gerr == nil && len(get.Kvs) > 0 {
				l.observeRange((*pb.RangeResponse)(get))
				return alreadyExists(l.name)
			}
		}
		return err
	}
	ler.LeaderTransitions = int(terms)
	sent := time.Now()
	g, err := l.client.Grant(ctx, lease.Seconds(l.cfg.ttl))
	if err != nil {
		return err
	}
	granted := time.Duration(g.TTL) * time.Second
	deadline := lease.Deadline(sent, granted, l.cfg.marginFor(granted))
	value, err := encode(ler, g.ID, 0)
	if err != nil {
		l.revokeLater(g.ID)
		return err
	}
	resp, err := l.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(l.key), "=", 0), clientv3.Compare(clientv3.Version(l.terms), "=", terms)).
		Then(clientv3.OpPut(l.key, string(value), clientv3.WithLease(g.ID)), clientv3.OpPut(l.terms, leaseHex(g.ID))).
		Else(clientv3.OpGet(l.key)).
		Commit()
	if err != nil {
		// The put may yet be applied: revoking the lease deletes the key
		// if it was, and makes the put fail if it was not.
		l.revokeLater(g.ID)
		return err
	}
	if !resp.Succeeded {
		l.revokeLater(g.ID)
		rr := resp.Responses[0].GetResponseRange()
		l.observeRange(rr)
		if rr == nil || len(rr.Kvs) == 0 {
			return fmt.Errorf("kubelock: create of %s: another term was created and ended since the lock counted the terms", clip(l.key))
		}
		return alreadyExists(l.name)
	}
	if !time.Now().Before(deadline) {
		l.revokeLater(g.ID)
		return fmt.Errorf("kubelock: create of %s answered after its deadline: %w", clip(l.key), ErrDeadline)
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		l.revokeLater(g.ID)
		return ErrClosed
	}
	l.startTerm(g.ID, resp.Header.Revision, deadline, ler.LeaderTransitions)
	l.checkRecordLocked(ler)
	l.cadence.renewed = time.Time{}
	l.mu.Unlock()
	return nil
}

// Update writes the record if it is unchanged since this lock last read or
// wrote it (resourcelock.Interface). With this lock's identity as holder it
// renews the current term: it renews the term's etcd lease, then writes
// the record, and moves the term's deadline forward from the renewal's
// send time. With an empty holder — client-go's release — it ends the term
// and revokes its lease, which deletes the record. Any other change is an
// error for which apierrors.IsConflict is true: the record is not this
// lock's current term (another holder's, or an earlier lease's, which etcd
// deletes when that lease ends). One change is taken as this lock's own: a
// newer record under the current term's lease, which only a renewal of this
// term whose reply was lost can have written (as long as nothing else
// writes with that lease, as nothing should). A renewal before the lock
// has read the record (Get) or created it, or after its last Get found
// none, returns an error wrapping ErrNotRead, not a conflict, as the Lease
// lock's "lease not initialized"; so does a release then, unless it
// follows this lock's own release (a no-op). A release while another
// identity's record is there (this lock holds no term) changes nothing
// and returns nil: the record is not this lock's to clear, and client-go
// releases only what it leads. A holder that is neither this lock's
// identity nor empty is a conflict too.
func (l *Lock) Update(ctx context.Context, ler rl.LeaderElectionRecord) error {
	l.calls.Lock()
	defer l.calls.Unlock()
	ctx, cancel := context.WithTimeout(ctx, l.cfg.timings.CallTimeout())
	defer cancel()
	if err := l.checkOpen(); err != nil {
		return err
	}
	if ler.HolderIdentity == "" {
		return l.release(ctx)
	}
	if err := l.checkHolder(ler); err != nil {
		return conflict(l.name, err)
	}
	l.mu.Lock()
	l.renewalStartingLocked(time.Now())
	l.checkRecordLocked(ler)
	l.mu.Unlock()
	err := l.renew(ctx, ler)
	l.mu.Lock()
	l.cadence.renewed = time.Time{}
	if err == nil {
		l.cadence.renewed = time.Now()
	}
	l.mu.Unlock()
	return err
}

func (l *Lock) renew(ctx context.Context, ler rl.LeaderElectionRecord) error {
	l.mu.Lock()
	if !l.read || !l.observed.exists {
		l.mu.Unlock()
		return fmt.Errorf("kubelock: update of %s: %w", clip(l.key), ErrNotRead)
	}
	t, obs := l.term, l.observed
	var deadline time.Time
	var renewals int64
	if t != nil {
		// Counted before it is sent: a renewal etcd applied but whose
		// reply was lost still counts, so the next one's bytes differ.
		t.renewals++
		deadline, renewals = t.deadline, t.renewals
	}
	l.mu.Unlock()
	if t == nil || obs.lease != t.lease {
		return conflict(l.name, fmt.Errorf("the record is not this lock's current term (%s)", l.describe(obs, t)))
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var sent time.Time
	var ka *clientv3.LeaseKeepAliveResponse
	err := l.attempts(ctx, func(ctx context.Context) (err error) {
		sent = time.Now()
		ka, err = l.client.KeepAliveOnce(ctx, t.lease)
		return err
	})
	if err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			l.end(t, ErrRecordGone)
			return conflict(l.name, err)
		}
		return err
	}
	granted := time.Duration(ka.TTL) * time.Second
	ler.LeaderTransitions = t.transitions // client-go's is its Create's, 0
	value, err := encode(ler, t.lease, renewals)
	if err != nil {
		return err
	}
	for range 2 {
		var resp *clientv3.TxnResponse
		err := l.attempts(ctx, func(ctx context.Context) (err error) {
			resp, err = l.client.Txn(ctx).
				If(clientv3.Compare(clientv3.ModRevision(l.key), "=", obs.modRev)).
				Then(clientv3.OpPut(l.key, string(value), clientv3.WithLease(t.lease))).
				Else(clientv3.OpGet(l.key)).
				Commit()
			return err
		})
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			l.end(t, ErrRecordGone)
			return conflict(l.name, err)
		}
		if err != nil {
			return err
		}
		if resp.Succeeded {
			return l.renewed(t, resp.Header.Revision, lease.Deadline(sent, granted, l.cfg.marginFor(granted)))
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 1 && kvs[0].Lease == int64(t.lease) {
			// Only this term writes under its lease: this is an earlier
			// renewal of ours whose reply was lost.
			obs.modRev = kvs[0].ModRevision
			continue
		}
		l.observeRange(resp.Responses[0].GetResponseRange())
		return conflict(l.name, fmt.Errorf("the record changed: %w", ErrRecordGone))
	}
	return conflict(l.name, errors.New("the record keeps changing under this term's lease"))
}

// attempts runs one request of a renewal, call, until it succeeds, fails
// for good, or ctx ends. Each attempt gets half of RetryPeriod: a member
// cut off from its leader, or frozen, may hold a request unanswered; the
// next attempt, a new request, goes to the client's next endpoint. Both of
// renew's requests may be repeated: a renewal of the lease is, and a
// record write whose reply was lost is found by the next one's compare.
// (Not under clientv3.WithRequireLeader: KeepAliveOnce retries a refusal
// at once, so a member without a leader would be asked in a tight loop.)
func (l *Lock) attempts(ctx context.Context, call func(context.Context) error) error {
	retry := backoff.Backoff{Min: 50 * time.Millisecond, Max: 500 * time.Millisecond, Jitter: true}
	for {
		actx, cancel := context.WithTimeout(ctx, l.cfg.timings.RetryPeriod/2)
		err := call(actx)
		cancel()
		if err == nil || ctx.Err() != nil || !unanswered(err) {
			return err
		}
		l.logger.Debug("renewal request unanswered; trying again", zap.Error(err))
		if !errors.Is(err, context.DeadlineExceeded) { // a refusal: pace the next
			if err := backoff.Sleep(ctx, retry.Next()); err != nil {
				return err
			}
		}
	}
}

// unanswered reports whether err says a request got no answer in time or
// found no leader (gRPC DeadlineExceeded or Unavailable), so that another
// attempt, on another connection, may succeed.
func unanswered(err error) bool {
	code := rpccode.Of(err)
	return errors.Is(err, context.DeadlineExceeded) || code == codes.DeadlineExceeded || code == codes.Unavailable
}

// renewed records a successful renewal of t.
func (l *Lock) renewed(t *term, rev int64, deadline time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.term != t {
		// The term ended while the renewal was on its way; it stays ended
		// (its lease is being revoked).
		return conflict(l.name, fmt.Errorf("the term ended during the renewal: %w", context.Cause(t.ctx)))
	}
	l.observed = observation{exists: true, modRev: rev, lease: t.lease}
	if deadline.After(t.deadline) {
		t.deadline = deadline
	}
	return nil
}

// release ends the term and revokes its lease, which deletes the record.
// A record under a lease this lock did not grant is left alone.
func (l *Lock) release(ctx context.Context) error {
	l.mu.Lock()
	obs, t := l.observed, l.last
	if !l.read || !obs.exists && !l.released {
		l.mu.Unlock()
		return fmt.Errorf("kubelock: release of %s: %w", clip(l.key), ErrNotRead)
	}
	if t == nil || !obs.exists || obs.lease != t.lease {
		l.mu.Unlock()
		return nil // nothing of this lock's to release
	}
	l.endLocked(t, ErrReleased, false)
	l.mu.Unlock()
	if _, err := l.client.Revoke(ctx, t.lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		l.revokeLater(t.lease)
		return err
	}
	l.observe(observation{})
	l.mu.Lock()
	l.released = true
	l.mu.Unlock()
	return nil
}
