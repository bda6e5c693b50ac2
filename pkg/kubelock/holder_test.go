package kubelock

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"

	"github.com/etcdlock/etcdlock/pkg/lock"
)

// A record deleted by hand while its holder has not seen the deletion
// (its replies are held back) does not let a follower in, whether it saw
// the record or was made after the deletion: the follower's Create waits
// for the holder's lease, which the holder revokes once its watch shows
// the deletion and its term has ended.
func TestCreateWaitsForTheHolderOfADeletedRecord(t *testing.T) {
	t.Parallel()
	for _, saw := range []bool{true, false} {
		t.Run(fmt.Sprintf("saw the record %v", saw), func(t *testing.T) {
			t.Parallel()
			p, url := etcdtest.Proxy(t, cluster.Endpoints()[0])
			cli := etcdtest.Client(t, cluster.Endpoints()...)
			a := newLock(t, etcdtest.Client(t, url), "a", lock.WithTTL(10*time.Second))
			ctx := ctxT(t)
			ta := create(t, ctx, a)
			var b *Lock
			if saw {
				b = newLock(t, cli, "b")
				if _, _, err := b.Get(ctx); err != nil {
					t.Fatal(err)
				}
			}
			p.PauseRx() // a hears nothing from etcd
			if _, err := cli.Delete(ctx, a.Key()); err != nil {
				t.Fatal(err)
			}
			if b == nil {
				b = newLock(t, cli, "b")
			}
			if _, _, err := b.Get(ctx); err == nil {
				t.Fatal("the record is still there")
			}
			err := b.Create(ctx, record("b"))
			if ta.Context().Err() != nil {
				t.Fatalf("a's term ended before it could hear of the deletion: %v", context.Cause(ta.Context()))
			}
			if !errors.Is(err, ErrHolderAlive) {
				t.Fatalf("Create while a's term is live = %v, want ErrHolderAlive", err)
			}
			p.UnpauseRx()
			if cause := waitEnded(t, ta, 10*time.Second); !errors.Is(cause, ErrRecordGone) {
				t.Errorf("a's term ended with %v, want ErrRecordGone", cause)
			}
			etcdtest.Eventually(t, 10*time.Second, func() bool { return b.Create(ctx, record("b")) == nil }, "b's Create once a's lease is revoked")
			if tb := mustTerm(t, b); tb.Token() <= ta.Token() {
				t.Errorf("b's token %v after a's %v", tb.Token(), ta.Token())
			}
		})
	}
}

// A holder cut off from etcd whose record is deleted by hand: a candidate
// that saw the record, trying Create as client-go does, gets in only after
// the holder's term ended — also in the last second of the holder's lease,
// which etcd reports as 0 s left.
func TestCreateWaitsOutTheLastSecondOfAPartitionedHolder(t *testing.T) {
	t.Parallel()
	p, url := etcdtest.Proxy(t, cluster.Endpoints()[0])
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	a := newLock(t, etcdtest.Client(t, url), "a", lock.WithTTL(3*time.Second))
	b := newLock(t, cli, "b", lock.WithTTL(3*time.Second))
	ctx := ctxT(t)
	ta := create(t, ctx, a)
	if _, _, err := b.Get(ctx); err != nil {
		t.Fatal(err)
	}
	p.BlackholeTx()
	p.BlackholeRx()
	defer func() { p.UnblackholeTx(); p.UnblackholeRx() }()
	if _, err := cli.Delete(ctx, a.Key()); err != nil {
		t.Fatal(err)
	}
	etcdtest.Eventually(t, 15*time.Second, func() bool {
		err := b.Create(ctx, record("b"))
		if err != nil && !errors.Is(err, ErrHolderAlive) && !apierrors.IsNotFound(err) {
			t.Logf("b's Create: %v", err)
		}
		return err == nil
	}, "b never got in")
	if ta.Context().Err() == nil {
		t.Fatal("b's Create succeeded while a's term was still live")
	}
}
