package holders

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/internal/keyspace"
	"github.com/etcdlock/etcdlock/pkg/internal/request"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// Break asks the holder of name whose token is token (for a read-write
// lock, one of its readers) to release, and waits up to wait (0: the
// DefaultBreakWait) for its key to go. A holder still there then, or one
// that no session watches (etcdctl lock, concurrency.Mutex, a detached
// grant), is fenced: its lease is revoked and its keys kept until the
// holder's deadline has passed, so the next holder starts after it stopped.
// It returns the holder and whether it released within the wait,
// lock.ErrNotHeld if no key of name has token and lock.ErrNotOwner if that
// key is a waiter's. A request a member holds unanswered is sent again;
// without a deadline in ctx, lock.DefaultTimeout bounds the call
// (lock.ErrUnavailable).
func Break(ctx context.Context, client *clientv3.Client, prefix, name string, token fencing.Token, wait time.Duration) (Contender, bool, error) {
	if wait < 0 {
		return Contender{}, false, fmt.Errorf("%w: break wait %v is negative", lock.ErrInvalidOption, wait)
	}
	b, err := newBreaker(ctx, client, prefix, name, token)
	if err != nil {
		return Contender{}, false, err
	}
	released, err := b.ask(ctx, cmp.Or(wait, DefaultBreakWait))
	if err != nil || released {
		return b.h, released, err
	}
	return b.h, false, b.fence(ctx, name)
}

// Force deletes the key of the holder of name whose token is token and
// revokes its lease at once, without asking it: the next holder may start
// while the broken one is still stopping. Its errors are Break's.
func Force(ctx context.Context, client *clientv3.Client, prefix, name string, token fencing.Token) (Contender, error) {
	b, err := newBreaker(ctx, client, prefix, name, token)
	if err != nil {
		return Contender{}, err
	}
	return b.h, b.force(ctx, name)
}

// newBreaker checks Break's and Force's arguments and finds the holder.
func newBreaker(ctx context.Context, client *clientv3.Client, prefix, name string, token fencing.Token) (*breaker, error) {
	if err := validate(client, prefix); err != nil {
		return nil, err
	}
	if err := lock.ValidateName(name); err != nil {
		return nil, err
	}
	if !token.IsValid() {
		return nil, fmt.Errorf("%w: %d", fencing.ErrInvalidToken, token)
	}
	h, err := holderOf(ctx, client, prefix, name, token)
	if err != nil {
		return nil, err
	}
	b := &breaker{client: client, h: h, key: h.Key}
	if h.SlotKey != "" {
		b.key = h.SlotKey // the key whose create revision is the token
	}
	return b, nil
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
		return Contender{}, fmt.Errorf("%w: token %s of %q is a waiter, not the holder", lock.ErrNotOwner, token, name)
	}
	return Contender{}, fmt.Errorf("%w: no holder of %q has token %s", lock.ErrNotHeld, name, token)
}

// DefaultBreakWait is how long Break waits for the holder to release when
// given no wait.
const DefaultBreakWait = 30 * time.Second

// revokeTimeout bounds the revoke of the holder's lease, which runs on a
// fresh context so that it happens even when the caller's has ended.
const revokeTimeout = 5 * time.Second

// breaker breaks one holder, h, whose token is key's create revision.
type breaker struct {
	client *clientv3.Client
	h      Contender
	key    string
}

// errGone says that the holder's key went away before Break wrote to it.
var errGone = errors.New("went away")

// ask writes the break request into the holder's key — its record with
// BreakRequested set, under the holder's own lease, so the holder's watch
// sees a write (lock.ErrBreakRequested) — and waits up to wait for the key to
// go, unless no session watches it. It reports whether the key went.
func (b *breaker) ask(ctx context.Context, wait time.Duration) (bool, error) {
	r := b.h.record
	if b.h.Foreign || r.Seq == 0 {
		return false, nil // no session watches it: nobody would answer
	}
	r.BreakRequested = time.Now().UTC()
	// Sent again while a member holds it unanswered: a request repeated
	// puts the same record, which the holder, lost at the first, ignores.
	resp, err := request.Do(ctx, b.client, nil, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return b.client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(b.key), "=", int64(b.h.Token))).
			Then(clientv3.OpPut(b.key, r.Encode(), clientv3.WithIgnoreLease())).
			Commit()
	})
	if err != nil {
		return false, fmt.Errorf("holders: break: ask the holder: %w", err)
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
	get, err := request.Do(ctx, b.client, nil, func(ctx context.Context) (*clientv3.GetResponse, error) {
		return b.client.Get(ctx, b.key)
	})
	if err != nil {
		return false, fmt.Errorf("holders: break: read the holder's key: %w", err)
	}
	return len(get.Kvs) == 0 || get.Kvs[0].CreateRevision != int64(b.h.Token), nil
}

// fence revokes the holder's lease and keeps every key of it on a lease of
// the same TTL, renewed after the revoke: the holder stops at its deadline,
// which counts from a renewal sent before the revoke, so before that lease
// can expire, and it frees the names earlier by releasing them.
func (b *breaker) fence(ctx context.Context, name string) error {
	ttl, err := request.Do(ctx, b.client, nil, func(ctx context.Context) (*clientv3.LeaseTimeToLiveResponse, error) {
		return b.client.TimeToLive(ctx, b.h.LeaseID, clientv3.WithAttachedKeys())
	})
	if err != nil {
		return fmt.Errorf("holders: break %q: read the holder's lease: %w", name, err)
	}
	if ttl.TTL < 0 {
		return nil // expired: its keys went with it
	}
	keys := make([]string, len(ttl.Keys))
	for i, k := range ttl.Keys {
		keys[i] = string(k)
	}
	// A fence's lease whose grant reply was lost holds no key, and expires.
	g, err := request.Do(ctx, b.client, nil, func(ctx context.Context) (*clientv3.LeaseGrantResponse, error) {
		return b.client.Grant(ctx, ttl.GrantedTTL)
	})
	if err != nil {
		return fmt.Errorf("holders: break %q: grant the fence's lease: %w", name, err)
	}
	// A transaction per batch: etcd bounds the operations of one.
	for batch := range slices.Chunk(keys, 64) {
		if err := b.move(ctx, batch, g.ID); err != nil {
			return fmt.Errorf("holders: break %q: move the holder's keys to the fence's lease: %w", name, err)
		}
	}
	if err := b.revoke(ctx, name); err != nil {
		return err
	}
	if _, err := request.Do(ctx, b.client, nil, func(ctx context.Context) (*clientv3.LeaseKeepAliveResponse, error) {
		return b.client.KeepAliveOnce(ctx, g.ID)
	}); err != nil {
		return fmt.Errorf("holders: break %q: renew the fence's lease: %w", name, err)
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
	read, err := request.Do(ctx, b.client, nil, func(ctx context.Context) (*clientv3.TxnResponse, error) {
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
	resp, err := request.Do(ctx, b.client, nil, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return b.client.Txn(ctx).If(cmps...).Then(puts...).Commit()
	})
	if err == nil && !resp.Succeeded {
		return b.move(ctx, keys, lease) // one changed since the read (released, say): read again
	}
	return err
}

// force deletes the holder's key at once and revokes its lease.
func (b *breaker) force(ctx context.Context, name string) error {
	resp, err := b.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(b.key), "=", int64(b.h.Token))).
		Then(clientv3.OpDelete(b.key)).
		Commit()
	if err != nil {
		return fmt.Errorf("holders: break %q: %w", name, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: holder of %q with token %s %w", lock.ErrNotHeld, name, b.h.Token, errGone)
	}
	return b.revoke(ctx, name)
}

// revoke revokes the holder's lease, within revokeTimeout.
func (b *breaker) revoke(ctx context.Context, name string) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), revokeTimeout)
	defer cancel()
	if _, err := request.Do(rctx, b.client, nil, func(ctx context.Context) (*clientv3.LeaseRevokeResponse, error) {
		resp, err := b.client.Revoke(ctx, b.h.LeaseID)
		if isLeaseNotFound(err) {
			err = nil // revoked by an earlier try, or expired
		}
		return resp, err
	}); err != nil {
		return fmt.Errorf("holders: break %q: lease revoke failed: %w", name, err)
	}
	return nil
}
