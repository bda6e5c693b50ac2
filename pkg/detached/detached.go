// Package detached performs single lock operations whose lease nobody
// renews in the background: a script acquires, renews and releases by
// explicit calls, identifying itself on every call by owner, unique per
// actor, and the grant's token. The locks are pkg/lock's plain locks: a
// session's Acquire of the same name waits for a detached grant, and the
// other way round. Every call is bounded by lock.DefaultTimeout when ctx
// has no deadline; one etcd did not answer in time fails with an error
// wrapping lock.ErrUnavailable.
package detached

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/clock"
	"github.com/etcdlock/etcdlock/pkg/internal/keyspace"
	"github.com/etcdlock/etcdlock/pkg/internal/request"
	"github.com/etcdlock/etcdlock/pkg/internal/settings"
	"github.com/etcdlock/etcdlock/pkg/lease"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// defaultCleanupTimeout bounds a lease revoke, as lock.WithCleanupTimeout's
// default does.
const defaultCleanupTimeout = 5 * time.Second

// Locks performs the operations. It keeps no state between calls; its
// methods are safe for concurrent use.
type Locks struct {
	client  *clientv3.Client
	prefix  string
	margin  time.Duration // 0: lease.DefaultMargin
	clock   clock.Clock
	cleanup time.Duration
	origin  keyspace.Origin // this process, for the records it writes
}

// Grant describes a lock acquired or renewed.
type Grant struct {
	Name     string
	Key      string
	Owner    string
	Token    fencing.Token
	LeaseID  clientv3.LeaseID
	TTL      time.Duration // granted by etcd
	Deadline time.Time     // conservative: renewal send time + TTL − margin
}

// New returns Locks using client. Its options are lock.WithPrefix,
// lock.WithSafetyMargin, lock.WithClock and lock.WithCleanupTimeout; a nil
// or invalid one fails with lock.ErrInvalidOption.
func New(client *clientv3.Client, opts ...lock.DetachedOption) (*Locks, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil client", lock.ErrInvalidOption)
	}
	var s settings.Settings
	for _, o := range opts {
		set, ok := o.(settings.Setter)
		if !ok { // nil
			return nil, fmt.Errorf("%w: nil option", lock.ErrInvalidOption)
		}
		if err := set.Set(&s); err != nil {
			return nil, err
		}
	}
	d := &Locks{client: client, prefix: s.Prefix, margin: s.SafetyMargin, clock: s.Clock, cleanup: s.CleanupTimeout,
		origin: keyspace.ThisProcess()}
	if d.prefix == "" {
		d.prefix = lock.DefaultPrefix
	}
	if d.clock == nil {
		d.clock = clock.Real()
	}
	if d.cleanup == 0 {
		d.cleanup = defaultCleanupTimeout
	}
	return d, nil
}

// NewOwner returns a new owner identity "host:pid:random", as a session's
// default owner is.
func NewOwner() string { return keyspace.ThisProcess().NewOwner() }

// Acquire grants a fresh lease of ttl (at least 1 s, rounded up to whole
// seconds; etcd may raise it to its minimum) and takes name with it if
// nobody holds or waits for it; else it revokes the lease and returns a
// *lock.LockedError. An empty owner or a bad ttl is lock.ErrInvalidOption.
// A grant already held under owner is replaced, never adopted: the new one
// has a new token, so the old one's release cannot free it.
func (d *Locks) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (Grant, error) {
	if err := lock.ValidateName(name); err != nil {
		return Grant{}, err
	}
	// The same checks as lock.WithOwner's and lock.WithTTL's.
	if err := lock.ValidateSessionOptions(lock.WithOwner(owner), lock.WithTTL(ttl)); err != nil {
		return Grant{}, err
	}
	if d.margin >= ttl {
		return Grant{}, fmt.Errorf("%w: safety margin %v must be below the TTL %v", lock.ErrInvalidOption, d.margin, ttl)
	}
	ctx, cancel := bound(ctx)
	defer cancel()
	send := d.clock.Now()
	gr, err := d.client.Grant(ctx, lease.Seconds(ttl))
	if err != nil {
		return Grant{}, fmt.Errorf("detached: grant lease: %w", unanswered(ctx, err))
	}
	pfx := keyspace.Of(d.prefix, name).Contenders()
	key := keyspace.Of(d.prefix, name).Contender(int64(gr.ID))
	record := keyspace.Record{Owner: owner, Host: d.origin.Host, PID: d.origin.PID, Acquired: send.UTC()}.Encode()
	for replaced := false; ; replaced = true {
		resp, err := d.client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(pfx), "=", 0).WithPrefix()).
			Then(clientv3.OpPut(key, record, clientv3.WithLease(gr.ID))).
			Else(clientv3.OpGet(pfx, clientv3.WithFirstCreate()...)).
			Commit()
		if err != nil {
			// The put may have happened; a retry replaces it by owner.
			// Until then the lease holds it for at most ttl.
			return Grant{}, fmt.Errorf("detached: acquire %q: %w", name, unanswered(ctx, err))
		}
		if resp.Succeeded {
			g := Grant{Name: name, Key: key, Owner: owner, Token: fencing.Token(resp.Header.Revision), LeaseID: gr.ID, TTL: time.Duration(gr.TTL) * time.Second}
			g.Deadline = lease.Deadline(send, g.TTL, lease.Margin(d.margin, g.TTL))
			return g, nil
		}
		holder := resp.Responses[0].GetResponseRange().Kvs[0]
		// Replaced once at most: holding it again under owner means a
		// concurrent acquire under the same owner, which wins.
		if replaced || keyspace.Owner(holder.Value) != owner {
			d.revoke(gr.ID)
			return Grant{}, lockedError(name, holder)
		}
		if _, err := request.CompareAndDelete(ctx, d.client, string(holder.Key), holder.CreateRevision); err != nil {
			d.revoke(gr.ID)
			return Grant{}, fmt.Errorf("detached: acquire %q: replace the earlier grant of %q: %w", name, owner, unanswered(ctx, err))
		}
		d.revoke(clientv3.LeaseID(holder.Lease))
	}
}

// Renew refreshes the lease of the lock that owner holds on name with token
// and returns the new deadline; lock.ErrNotHeld if that lock no longer
// exists (never revived) or was broken (holders.Break; the error wraps
// lock.ErrBreakRequested too), lock.ErrNotOwner if token is not owner's
// current holder.
func (d *Locks) Renew(ctx context.Context, name, owner string, token fencing.Token) (Grant, error) {
	kv, err := d.find(ctx, name, owner, token, true)
	if err != nil {
		return Grant{}, err
	}
	// A break moved the key to a lease of its own, which keeps it until the
	// holder's deadline: renewing that would keep the name forever.
	if r, ok := keyspace.Decode(kv.Value); ok && !r.BreakRequested.IsZero() {
		return Grant{}, fmt.Errorf("%w: %q with token %s was broken: %w", lock.ErrNotHeld, name, token, lock.ErrBreakRequested)
	}
	send := d.clock.Now()
	resp, err := request.Do(ctx, d.client, nil, func(ctx context.Context) (*clientv3.LeaseKeepAliveResponse, error) {
		return d.client.KeepAliveOnce(ctx, clientv3.LeaseID(kv.Lease))
	})
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return Grant{}, fmt.Errorf("%w: %q with token %d: lease expired", lock.ErrNotHeld, name, kv.CreateRevision)
	}
	if err != nil {
		return Grant{}, fmt.Errorf("detached: renew %q: %w", name, err)
	}
	ttl := time.Duration(resp.TTL) * time.Second
	return Grant{
		Name: name, Key: string(kv.Key), Owner: owner, Token: fencing.Token(kv.CreateRevision),
		LeaseID: clientv3.LeaseID(kv.Lease), TTL: ttl, Deadline: lease.Deadline(send, ttl, lease.Margin(d.margin, ttl)),
	}, nil
}

// Release deletes the lock that owner holds on name with token, by a
// compare on the token, and revokes its lease: nil if it no longer exists,
// lock.ErrNotOwner (changing nothing) if token is another owner's.
func (d *Locks) Release(ctx context.Context, name, owner string, token fencing.Token) error {
	kv, err := d.find(ctx, name, owner, token, false)
	if errors.Is(err, lock.ErrNotHeld) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := request.Do(ctx, d.client, nil, func(ctx context.Context) (bool, error) {
		return request.CompareAndDelete(ctx, d.client, string(kv.Key), int64(token))
	}); err != nil {
		return fmt.Errorf("detached: release %q: %w", name, err)
	}
	d.revoke(clientv3.LeaseID(kv.Lease))
	return nil
}

// find returns the key under name created at token, checking its owner and,
// with mustHold, that it is the current holder.
func (d *Locks) find(ctx context.Context, name, owner string, token fencing.Token, mustHold bool) (*mvccpb.KeyValue, error) {
	if err := lock.ValidateName(name); err != nil {
		return nil, err
	}
	if !token.IsValid() {
		return nil, fmt.Errorf("%w: %d", fencing.ErrInvalidToken, token)
	}
	pfx := keyspace.Of(d.prefix, name).Contenders()
	resp, err := request.Do(ctx, d.client, nil, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return d.client.Txn(ctx).Then(
			clientv3.OpGet(pfx, clientv3.WithPrefix(), clientv3.WithMinCreateRev(int64(token)), clientv3.WithMaxCreateRev(int64(token))),
			clientv3.OpGet(pfx, clientv3.WithFirstCreate()...),
		).Commit()
	})
	if err != nil {
		return nil, fmt.Errorf("detached: read %q: %w", name, err)
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return nil, fmt.Errorf("%w: %q with token %s", lock.ErrNotHeld, name, token)
	}
	kv := kvs[0]
	if got := keyspace.Owner(kv.Value); got != owner {
		return nil, fmt.Errorf("%w: token %s of %q belongs to %q, not %q", lock.ErrNotOwner, token, name, got, owner)
	}
	if holder := resp.Responses[1].GetResponseRange().Kvs; mustHold && (len(holder) == 0 || holder[0].CreateRevision != int64(token)) {
		return nil, fmt.Errorf("%w: token %s is not the holder of %q", lock.ErrNotOwner, token, name)
	}
	return kv, nil
}

// revoke removes a lease on a fresh bounded context; failure only means the
// lease expires on its own.
func (d *Locks) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), d.cleanup)
	defer cancel()
	_, _ = d.client.Revoke(ctx, id)
}

// bound is ctx, bounded by lock.DefaultTimeout if it has no deadline.
func bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, lock.DefaultTimeout)
}

// unanswered is err, wrapping lock.ErrUnavailable too if ctx's deadline
// passed without an answer.
func unanswered(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && request.Unanswered(err) {
		return fmt.Errorf("%w: %w", lock.ErrUnavailable, err)
	}
	return err
}

// lockedError is the *lock.LockedError of a name whose holder is kv.
func lockedError(name string, kv *mvccpb.KeyValue) *lock.LockedError {
	r, ok := keyspace.Decode(kv.Value)
	return &lock.LockedError{Name: name, Owner: r.Owner, Token: fencing.Token(kv.CreateRevision), Key: string(kv.Key), Since: r.Acquired,
		LeaseID: clientv3.LeaseID(kv.Lease), Foreign: !ok}
}
