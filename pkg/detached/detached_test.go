package detached_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/detached"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/holders"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

func newDetached(t *testing.T) *detached.Locks {
	t.Helper()
	d, err := detached.New(client(t), lock.WithPrefix(prefix(t)))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDetachedAcquireRenewRelease(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	d := newDetached(t)
	before := time.Now()
	g, err := d.Acquire(ctx, "cron", "alice", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if g.Owner != "alice" || g.Name != "cron" || !g.Token.IsValid() || g.TTL != 5*time.Second {
		t.Errorf("grant = %+v", g)
	}
	if g.Deadline.Before(before.Add(4*time.Second)) || g.Deadline.After(time.Now().Add(4500*time.Millisecond)) {
		t.Errorf("deadline %v not send time + 5s - 500ms", g.Deadline)
	}
	ttl, err := cli.TimeToLive(ctx, g.LeaseID)
	if err != nil || ttl.TTL <= 0 {
		t.Fatalf("lease %x not alive: %v %v", g.LeaseID, ttl, err)
	}

	_, err = d.Acquire(ctx, "cron", "bob", 5*time.Second)
	var locked *lock.LockedError
	if !errors.As(err, &locked) || locked.Owner != "alice" || locked.Token != g.Token {
		t.Fatalf("bob's Acquire = %v, want LockedError naming alice", err)
	}
	if keys := keysUnder(t, cli, prefix(t)); len(keys) != 1 {
		t.Errorf("keys after bob's failed acquire: %v", keys)
	}

	r, err := d.Renew(ctx, "cron", "alice", g.Token)
	if err != nil || r.Token != g.Token || r.LeaseID != g.LeaseID || r.Deadline.Before(g.Deadline) {
		t.Errorf("Renew = %+v, %v", r, err)
	}
	if _, err := d.Renew(ctx, "cron", "bob", g.Token); !errors.Is(err, lock.ErrNotOwner) {
		t.Errorf("Renew by bob = %v, want ErrNotOwner", err)
	}
	if err := d.Release(ctx, "cron", "bob", g.Token); !errors.Is(err, lock.ErrNotOwner) {
		t.Errorf("Release by bob = %v, want ErrNotOwner", err)
	}
	if err := d.Release(ctx, "cron", "alice", g.Token); err != nil {
		t.Fatal(err)
	}
	if keys := keysUnder(t, cli, prefix(t)); len(keys) != 0 {
		t.Errorf("keys after release: %v", keys)
	}
	if ttl, err := cli.TimeToLive(ctx, g.LeaseID); err != nil || ttl.TTL != -1 {
		t.Errorf("lease after release: %+v %v, want revoked", ttl, err)
	}
	if err := d.Release(ctx, "cron", "alice", g.Token); err != nil {
		t.Errorf("repeated Release = %v, want nil", err)
	}
	if _, err := d.Renew(ctx, "cron", "alice", g.Token); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Renew after release = %v, want ErrNotHeld", err)
	}
}

// An acquire under an owner that already holds the name (its reply was
// lost, or its release did not complete) replaces that grant: a new token,
// and the earlier grant's release, retried later, frees nothing.
func TestDetachedReacquireReplacesOwnGrant(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	d := newDetached(t)
	g, err := d.Acquire(ctx, "n", "alice", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	again, err := d.Acquire(ctx, "n", "alice", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if again.Token <= g.Token || again.Key == g.Key {
		t.Fatalf("re-acquire = %+v; want a new key and a token above %v", again, g.Token)
	}
	if err := d.Release(ctx, "n", "alice", g.Token); err != nil {
		t.Fatalf("late release of the first grant = %v, want nil", err)
	}
	if _, err := d.Renew(ctx, "n", "alice", again.Token); err != nil {
		t.Fatalf("the new grant after the first grant's release: %v", err)
	}
	if _, err := d.Renew(ctx, "n", "alice", g.Token); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("renew of the replaced grant = %v, want ErrNotHeld", err)
	}
	if _, err := d.Acquire(ctx, "n", "bob", 5*time.Second); !errors.Is(err, lock.ErrLocked) {
		t.Errorf("another owner = %v, want ErrLocked", err)
	}
}

// A safety margin at or above the TTL would return a grant whose deadline
// has already passed.
func TestDetachedRejectsMarginAboveTTL(t *testing.T) {
	t.Parallel()
	d, err := detached.New(client(t), lock.WithPrefix(prefix(t)), lock.WithSafetyMargin(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if g, err := d.Acquire(testCtx(t), "m", "o", 5*time.Second); !errors.Is(err, lock.ErrInvalidOption) {
		t.Errorf("Acquire with a 1h margin and a 5s TTL = %+v, %v; want ErrInvalidOption", g, err)
	}
}

func TestDetachedRenewAfterExpiryFails(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	d := newDetached(t)
	g, err := d.Acquire(ctx, "e", "alice", time.Second) // raised to 2s by etcd
	if err != nil {
		t.Fatal(err)
	}
	cli := client(t)
	etcdtest.Eventually(t, time.Minute, func() bool {
		ttl, err := cli.TimeToLive(ctx, g.LeaseID)
		return err == nil && ttl.TTL == -1
	}, "the grant's lease never expired")
	if _, err := d.Renew(ctx, "e", "alice", g.Token); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Renew after expiry = %v, want ErrNotHeld", err)
	}
	if err := d.Release(ctx, "e", "alice", g.Token); err != nil {
		t.Errorf("Release after expiry = %v, want nil", err)
	}
}

func TestDetachedRejectsBadInput(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	d := newDetached(t)
	if _, err := d.Acquire(ctx, "a\x00b", "o", 5*time.Second); !errors.Is(err, lock.ErrInvalidName) {
		t.Errorf("bad name: %v", err)
	}
	if _, err := d.Acquire(ctx, "a", "", 5*time.Second); !errors.Is(err, lock.ErrInvalidOption) {
		t.Errorf("empty owner: %v", err)
	}
	if _, err := d.Acquire(ctx, "a", "o", 0); !errors.Is(err, lock.ErrInvalidOption) {
		t.Errorf("zero ttl: %v", err)
	}
	if _, err := d.Acquire(ctx, "a", "o", math.MaxInt64); !errors.Is(err, lock.ErrInvalidOption) {
		t.Errorf("ttl near the largest Duration: %v", err)
	}
	if _, err := d.Acquire(ctx, "a", "o", maxTTL+time.Second); !errors.Is(err, lock.ErrInvalidOption) {
		t.Errorf("ttl above etcd's maximum: %v", err)
	}
	// etcd's maximum itself is granted as asked.
	g, err := d.Acquire(ctx, "max", "o", maxTTL)
	if err != nil {
		t.Fatalf("maximum TTL: %v", err)
	}
	if g.TTL != maxTTL {
		t.Errorf("granted TTL %v, want %v", g.TTL, maxTTL)
	}
	if err := d.Release(ctx, "max", "o", g.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Renew(ctx, "a", "o", 0); !errors.Is(err, fencing.ErrInvalidToken) {
		t.Errorf("zero token: %v", err)
	}
	if err := d.Release(ctx, "a", "o", -3); !errors.Is(err, fencing.ErrInvalidToken) {
		t.Errorf("negative token: %v", err)
	}
	if _, err := detached.New(nil); !errors.Is(err, lock.ErrInvalidOption) {
		t.Errorf("nil client: %v", err)
	}
	if _, err := detached.New(client(t), nil); !errors.Is(err, lock.ErrInvalidOption) {
		t.Errorf("nil option: %v", err)
	}
	if _, err := detached.New(client(t), lock.WithCleanupTimeout(-time.Second)); !errors.Is(err, lock.ErrInvalidOption) {
		t.Errorf("negative clean-up timeout: %v", err)
	}
}

// A grant broken by holders.Break is not renewed: its key, moved to the
// break's lease until the grant's deadline, would otherwise be kept by
// every renewal of its old token, and the name never freed.
func TestDetachedRenewAfterABreakFails(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	d := newDetached(t)
	g, err := d.Acquire(ctx, "b", "alice", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, released, err := holders.Break(ctx, cli, prefix(t), "b", g.Token, 0); err != nil || released {
		t.Fatalf("Break = released %v, %v; want the grant fenced", released, err)
	}
	_, err = d.Renew(ctx, "b", "alice", g.Token)
	if !errors.Is(err, lock.ErrNotHeld) || !errors.Is(err, lock.ErrBreakRequested) {
		t.Fatalf("Renew of a broken grant = %v, want ErrNotHeld and ErrBreakRequested", err)
	}
	etcdtest.Eventually(t, time.Minute, func() bool {
		_, err := d.Acquire(ctx, "b", "bob", 5*time.Second)
		return err == nil
	}, "the broken grant's name was never freed")
}
