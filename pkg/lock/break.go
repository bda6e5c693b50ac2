package lock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/internal/keyspace"
)

// Break asks the holder of name whose token is token (for a read-write
// lock, one of its readers) to release it, and waits until its key is
// gone: the holder released it, or its lease expired. A holder still
// holding it when the wait ends (WithBreakWait, default DefaultBreakWait)
// is fenced: its lease is revoked and its keys are kept, on a lease of its
// TTL, until it releases them or that TTL passes, so that the next holder
// cannot start before the broken one stopped at its deadline. WithForce
// deletes the key and revokes the lease at once instead. A holder that no
// session watches (etcdctl lock, concurrency.Mutex, a Detached grant) is
// fenced without waiting.
//
// It returns the holder and whether it released within the wait (false:
// fenced or forced), ErrNotHeld if no key of name has token (released,
// expired or broken meanwhile) and ErrNotOwner if that key is a waiter's.
// Each of its writes is sent again while a member holds it unanswered;
// without a deadline in ctx, one that etcd does not answer within
// DefaultTimeout fails with ErrUnavailable. Options: WithPrefix, WithCleanupTimeout, WithBreakWait, WithForce.
func Break(ctx context.Context, client *clientv3.Client, name string, token fencing.Token, opts ...BreakOption) (Contender, bool, error) {
	if err := validateClient(client); err != nil {
		return Contender{}, false, err
	}
	if err := ValidateName(name); err != nil {
		return Contender{}, false, err
	}
	if !token.IsValid() {
		return Contender{}, false, fmt.Errorf("%w: %d", fencing.ErrInvalidToken, token)
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return Contender{}, false, err
	}
	h, err := holderOf(ctx, client, cfg.prefix, name, token)
	if err != nil {
		return Contender{}, false, err
	}
	b := breaker{client: client, h: h, key: h.Key, cleanup: cfg.cleanupTimeout}
	if h.SlotKey != "" {
		b.key = h.SlotKey // the key whose create revision is the token
	}
	if cfg.force {
		return h, false, b.force(ctx, name)
	}
	released, err := b.ask(ctx, cfg.breakWait)
	if err != nil || released {
		return h, released, err
	}
	return h, false, b.fence(ctx, name)
}

// holderOf is the holder of name with token.
func holderOf(ctx context.Context, client *clientv3.Client, prefix, name string, token fencing.Token) (Contender, error) {
	st, err := readStatus(ctx, client, prefix, name)
	if err != nil {
		return Contender{}, err
	}
	i := slices.IndexFunc(st.Holders, func(h Contender) bool { return h.Token == token })
	if i >= 0 {
		return st.Holders[i], nil
	}
	if slices.ContainsFunc(st.Waiters, func(w Contender) bool { return w.Token == token }) {
		return Contender{}, fmt.Errorf("%w: token %s of %q is a waiter, not the holder", ErrNotOwner, token, name)
	}
	return Contender{}, fmt.Errorf("%w: no holder of %q has token %s", ErrNotHeld, name, token)
}

// DefaultBreakWait is how long Break waits for the holder to release by
// default.
const DefaultBreakWait = 30 * time.Second

// breaker breaks one holder, h, whose token is key's create revision.
type breaker struct {
	client  *clientv3.Client
	h       Contender
	key     string
	cleanup time.Duration
}

// errGone says that the holder's key went away before Break wrote to it.
var errGone = errors.New("went away")

// ask writes the break request into the holder's key — its record with
// BreakRequested set, under the holder's own lease, so the holder's watch
// sees a write (ErrBreakRequested) — and waits up to wait for the key to
// go, unless no session watches it. It reports whether the key went.
func (b *breaker) ask(ctx context.Context, wait time.Duration) (bool, error) {
	r := b.h.Record
	if b.h.Foreign || r.Seq == 0 {
		return false, nil // no session watches it: nobody would answer
	}
	if wait == 0 {
		wait = DefaultBreakWait
	}
	r.BreakRequested = time.Now().UTC()
	// Sent again while a member holds it unanswered: a request repeated
	// puts the same record, which the holder, lost at the first, ignores.
	resp, err := retried(ctx, b.client, nil, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return b.client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(b.key), "=", int64(b.h.Token))).
			Then(clientv3.OpPut(b.key, r.Encode(), clientv3.WithIgnoreLease())).
			Commit()
	})
	if err != nil {
		return false, fmt.Errorf("lock: break: ask the holder: %w", err)
	}
	if !resp.Succeeded {
		return true, nil // released before it was asked
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for ev := range b.client.Watch(clientv3.WithRequireLeader(wctx), b.key, clientv3.WithRev(resp.Header.Revision+1), clientv3.WithFilterPut()) {
		if len(ev.Events) > 0 {
			return true, nil
		}
		if ev.Err() != nil {
			break // compacted, canceled: read instead
		}
	}
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	// The wait ended, or the watch broke: is the key still the holder's?
	get, err := retried(ctx, b.client, nil, func(ctx context.Context) (*clientv3.GetResponse, error) {
		return b.client.Get(ctx, b.key)
	})
	if err != nil {
		return false, fmt.Errorf("lock: break: read the holder's key: %w", err)
	}
	return len(get.Kvs) == 0 || get.Kvs[0].CreateRevision != int64(b.h.Token), nil
}

// fence revokes the holder's lease and keeps every key of it on a lease of
// the same TTL, renewed after the revoke: the holder stops at its deadline,
// which counts from a renewal sent before the revoke, so before that lease
// can expire, and it frees the names earlier by releasing them.
func (b *breaker) fence(ctx context.Context, name string) error {
	ttl, err := retried(ctx, b.client, nil, func(ctx context.Context) (*clientv3.LeaseTimeToLiveResponse, error) {
		return b.client.TimeToLive(ctx, b.h.LeaseID, clientv3.WithAttachedKeys())
	})
	if err != nil {
		return fmt.Errorf("lock: break %q: read the holder's lease: %w", name, err)
	}
	if ttl.TTL < 0 {
		return nil // expired: its keys went with it
	}
	keys := make([]string, len(ttl.Keys))
	for i, k := range ttl.Keys {
		keys[i] = string(k)
	}
	// A fence's lease whose grant reply was lost holds no key, and expires.
	g, err := retried(ctx, b.client, nil, func(ctx context.Context) (*clientv3.LeaseGrantResponse, error) {
		return b.client.Grant(ctx, ttl.GrantedTTL)
	})
	if err != nil {
		return fmt.Errorf("lock: break %q: grant the fence's lease: %w", name, err)
	}
	// A transaction per batch: etcd bounds the operations of one.
	for batch := range slices.Chunk(keys, 64) {
		if err := b.move(ctx, batch, g.ID); err != nil {
			return fmt.Errorf("lock: break %q: move the holder's keys to the fence's lease: %w", name, err)
		}
	}
	if err := b.revoke(ctx, name); err != nil {
		return err
	}
	if _, err := retried(ctx, b.client, nil, func(ctx context.Context) (*clientv3.LeaseKeepAliveResponse, error) {
		return b.client.KeepAliveOnce(ctx, g.ID)
	}); err != nil {
		return fmt.Errorf("lock: break %q: renew the fence's lease: %w", name, err)
	}
	return nil
}

// move puts each key of keys that still exists back with its value, on
// lease: a put keeps a key's create revision, so its place in every queue
// and its token.
func (b *breaker) move(ctx context.Context, keys []string, lease clientv3.LeaseID) error {
	gets := make([]clientv3.Op, len(keys))
	for i, k := range keys {
		gets[i] = clientv3.OpGet(k)
	}
	read, err := retried(ctx, b.client, nil, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return b.client.Txn(ctx).Then(gets...).Commit()
	})
	if err != nil {
		return err
	}
	var cmps []clientv3.Cmp
	var puts []clientv3.Op
	for _, r := range read.Responses {
		for _, kv := range r.GetResponseRange().Kvs {
			if clientv3.LeaseID(kv.Lease) != b.h.LeaseID {
				continue
			}
			value := kv.Value
			if r, ok := keyspace.Decode(value); ok && r.BreakRequested.IsZero() {
				r.BreakRequested = time.Now().UTC() // Inspect shows the name as being broken
				value = []byte(r.Encode())
			}
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision))
			puts = append(puts, clientv3.OpPut(string(kv.Key), string(value), clientv3.WithLease(lease)))
		}
	}
	if len(puts) == 0 {
		return nil
	}
	// Sent again while a member holds it unanswered: a put that landed
	// moved the key's mod revision, so a repeat does nothing, and the read
	// that follows finds the key on the fence's lease.
	resp, err := retried(ctx, b.client, nil, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return b.client.Txn(ctx).If(cmps...).Then(puts...).Commit()
	})
	if err == nil && !resp.Succeeded {
		return b.move(ctx, keys, lease) // one changed since the read (released, say): read again
	}
	return err
}

// force deletes the holder's key at once and revokes its lease.
func (b *breaker) force(ctx context.Context, name string) error {
	ok, err := compareAndDelete(ctx, b.client, b.key, int64(b.h.Token))
	if err != nil {
		return fmt.Errorf("lock: break %q: %w", name, err)
	}
	if !ok {
		return fmt.Errorf("%w: holder of %q with token %s %w", ErrNotHeld, name, b.h.Token, errGone)
	}
	return b.revoke(ctx, name)
}

// revoke revokes the holder's lease, within the clean-up timeout.
func (b *breaker) revoke(ctx context.Context, name string) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cleanup)
	defer cancel()
	if _, err := retried(rctx, b.client, nil, func(ctx context.Context) (*clientv3.LeaseRevokeResponse, error) {
		resp, err := b.client.Revoke(ctx, b.h.LeaseID)
		if isLeaseNotFound(err) {
			err = nil // revoked by an earlier try, or expired
		}
		return resp, err
	}); err != nil {
		return fmt.Errorf("lock: break %q: lease revoke failed: %w", name, err)
	}
	return nil
}

// WithBreakWait bounds how long Break waits for the holder to release
// before it fences it; d must be positive. A BreakOption.
func WithBreakWait(d time.Duration) BreakWaitOption { return BreakWaitOption{d} }

// BreakWaitOption is what WithBreakWait returns: a BreakOption.
type BreakWaitOption struct{ d time.Duration }

func (o BreakWaitOption) set(c *config) error {
	if o.d <= 0 {
		return invalid("break wait %v must be positive", o.d)
	}
	c.breakWait = o.d
	return nil
}

func (BreakWaitOption) breakOption() {}

// WithForce makes Break delete the holder's key and revoke its lease at
// once, without asking it first: the next holder may start while the
// broken one is still stopping. A BreakOption.
func WithForce() ForceOption { return ForceOption{} }

// ForceOption is what WithForce returns: a BreakOption.
type ForceOption struct{}

func (ForceOption) set(c *config) error {
	c.force = true
	return nil
}

func (ForceOption) breakOption() {}
