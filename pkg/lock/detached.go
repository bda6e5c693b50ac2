package lock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/internal/keyspace"
	"github.com/etcdlock/etcdlock/pkg/lease"
)

// Detached performs single lock operations whose lease nobody renews in the
// background: the caller (a script) renews explicitly and identifies itself
// on every call by owner, unique per actor, and token. It keeps no state
// between calls; its methods are safe for concurrent use.
type Detached struct {
	client *clientv3.Client
	cfg    config
}

// Grant describes a lock acquired or renewed by Detached.
type Grant struct {
	Name     string
	Key      string
	Owner    string
	Token    fencing.Token
	LeaseID  clientv3.LeaseID
	TTL      time.Duration // granted by etcd
	Deadline time.Time     // conservative: renewal send time + TTL − margin
}

// NewDetached returns a Detached using client. Its options are WithPrefix,
// WithSafetyMargin, WithClock and WithCleanupTimeout; a nil or invalid one
// fails with ErrInvalidOption.
func NewDetached(client *clientv3.Client, opts ...DetachedOption) (*Detached, error) {
	if err := validateClient(client); err != nil {
		return nil, err
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	return &Detached{client: client, cfg: cfg}, nil
}

// Acquire grants a fresh lease of ttl and takes name with it if nobody holds
// or waits for it; else it revokes the lease and returns a *LockedError. A
// grant already held under owner is replaced, never adopted: the new one
// has a new token, so the old one's release cannot free it.
func (d *Detached) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (Grant, error) {
	if err := ValidateName(name); err != nil {
		return Grant{}, err
	}
	// The same checks as WithOwner's and WithTTL's.
	if err := validateOwner(owner); err != nil {
		return Grant{}, err
	}
	if err := validateTTL(ttl); err != nil {
		return Grant{}, err
	}
	if err := d.cfg.marginBelow(ttl); err != nil {
		return Grant{}, err
	}
	send := d.cfg.clock.Now()
	gr, err := d.client.Grant(ctx, lease.Seconds(ttl))
	if err != nil {
		return Grant{}, fmt.Errorf("lock: grant lease: %w", err)
	}
	pfx := keyspace.Of(d.cfg.prefix, name).Contenders()
	key := keyspace.Of(d.cfg.prefix, name).Contender(int64(gr.ID))
	for replaced := false; ; replaced = true {
		resp, err := d.client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(pfx), "=", 0).WithPrefix()).
			Then(clientv3.OpPut(key, newRecord(owner, d.cfg.origin, send, 0, acquireConfig{}), clientv3.WithLease(gr.ID))).
			Else(clientv3.OpGet(pfx, clientv3.WithFirstCreate()...)).
			Commit()
		if err != nil {
			// The put may have happened; a retry replaces it by owner.
			// Until then the lease holds it for at most ttl.
			return Grant{}, fmt.Errorf("lock: acquire %q: %w", name, err)
		}
		if resp.Succeeded {
			g := Grant{Name: name, Key: key, Owner: owner, Token: fencing.Token(resp.Header.Revision), LeaseID: gr.ID, TTL: time.Duration(gr.TTL) * time.Second}
			g.Deadline = lease.Deadline(send, g.TTL, d.cfg.safetyMargin(g.TTL))
			return g, nil
		}
		holder := resp.Responses[0].GetResponseRange().Kvs[0]
		// Replaced once at most: holding it again under owner means a
		// concurrent acquire under the same owner, which wins.
		if replaced || keyspace.Owner(holder.Value) != owner {
			d.revoke(gr.ID)
			return Grant{}, lockedError(name, holder)
		}
		if _, err := compareAndDelete(ctx, d.client, string(holder.Key), holder.CreateRevision); err != nil {
			d.revoke(gr.ID)
			return Grant{}, fmt.Errorf("lock: acquire %q: replace the earlier grant of %q: %w", name, owner, err)
		}
		d.revoke(clientv3.LeaseID(holder.Lease))
	}
}

// Renew refreshes the lease of the lock that owner holds on name with token
// and returns the new deadline; ErrNotHeld if that lock no longer exists
// (never revived), ErrNotOwner if token is not owner's current holder.
func (d *Detached) Renew(ctx context.Context, name, owner string, token fencing.Token) (Grant, error) {
	kv, err := d.find(ctx, name, owner, token, true)
	if err != nil {
		return Grant{}, err
	}
	return d.renewKV(ctx, name, owner, kv)
}

// Release deletes the lock that owner holds on name with token, by a
// compare on the token, and revokes its lease: nil if it no longer exists,
// ErrNotOwner (changing nothing) if token is another owner's.
func (d *Detached) Release(ctx context.Context, name, owner string, token fencing.Token) error {
	kv, err := d.find(ctx, name, owner, token, false)
	if errors.Is(err, ErrNotHeld) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := compareAndDelete(ctx, d.client, string(kv.Key), int64(token)); err != nil {
		return fmt.Errorf("lock: release %q: %w", name, err)
	}
	d.revoke(clientv3.LeaseID(kv.Lease))
	return nil
}

// find returns the key under name created at token, checking its owner and,
// with mustHold, that it is the current holder.
func (d *Detached) find(ctx context.Context, name, owner string, token fencing.Token, mustHold bool) (*mvccpb.KeyValue, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if !token.IsValid() {
		return nil, fmt.Errorf("%w: %d", fencing.ErrInvalidToken, token)
	}
	pfx := keyspace.Of(d.cfg.prefix, name).Contenders()
	resp, err := d.client.Txn(ctx).Then(
		clientv3.OpGet(pfx, clientv3.WithPrefix(), clientv3.WithMinCreateRev(int64(token)), clientv3.WithMaxCreateRev(int64(token))),
		clientv3.OpGet(pfx, clientv3.WithFirstCreate()...),
	).Commit()
	if err != nil {
		return nil, fmt.Errorf("lock: read %q: %w", name, err)
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return nil, fmt.Errorf("%w: %q with token %s", ErrNotHeld, name, token)
	}
	kv := kvs[0]
	if got := keyspace.Owner(kv.Value); got != owner {
		return nil, fmt.Errorf("%w: token %s of %q belongs to %q, not %q", ErrNotOwner, token, name, got, owner)
	}
	if holder := resp.Responses[1].GetResponseRange().Kvs; mustHold && (len(holder) == 0 || holder[0].CreateRevision != int64(token)) {
		return nil, fmt.Errorf("%w: token %s is not the holder of %q", ErrNotOwner, token, name)
	}
	return kv, nil
}

func (d *Detached) renewKV(ctx context.Context, name, owner string, kv *mvccpb.KeyValue) (Grant, error) {
	send := d.cfg.clock.Now()
	resp, err := d.client.KeepAliveOnce(ctx, clientv3.LeaseID(kv.Lease))
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return Grant{}, fmt.Errorf("%w: %q with token %d: lease expired", ErrNotHeld, name, kv.CreateRevision)
	}
	if err != nil {
		return Grant{}, fmt.Errorf("lock: renew %q: %w", name, err)
	}
	ttl := time.Duration(resp.TTL) * time.Second
	return Grant{
		Name: name, Key: string(kv.Key), Owner: owner, Token: fencing.Token(kv.CreateRevision),
		LeaseID: clientv3.LeaseID(kv.Lease), TTL: ttl, Deadline: lease.Deadline(send, ttl, d.cfg.safetyMargin(ttl)),
	}, nil
}

// revoke removes a lease on a fresh bounded context; failure only means the
// lease expires on its own.
func (d *Detached) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.cleanupTimeout)
	defer cancel()
	_, _ = d.client.Revoke(ctx, id)
}
