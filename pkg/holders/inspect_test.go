package holders_test

import (
	"errors"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/holders"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

func TestInspectListBreak(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	pfx := prefix(t)
	st, err := holders.Inspect(ctx, cli, pfx, "job")
	if err != nil || st.Holder != nil || len(st.Waiters) != 0 {
		t.Fatalf("free name: %+v %v", st, err)
	}
	a := newSession(t, cli, lock.WithOwner("alice"))
	la, err := a.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	b := newSession(t, cli, lock.WithOwner("bob"))
	bob := queueWaiter(t, ctx, b, "job", 2)
	if _, err := a.Acquire(ctx, "other"); err != nil {
		t.Fatal(err)
	}

	st, err = holders.Inspect(ctx, cli, pfx, "job")
	if err != nil || st.Holder == nil || st.Holder.Owner != "alice" || st.Holder.Token != la.Token() || len(st.Waiters) != 1 || st.Waiters[0].Owner != "bob" {
		t.Fatalf("Inspect = %+v, %v", st, err)
	}
	all, err := holders.List(ctx, cli, pfx, "")
	if err != nil || len(all) != 2 || all[0].Name != "job" || all[1].Name != "other" || len(all[0].Waiters) != 1 {
		t.Fatalf("List = %+v, %v", all, err)
	}

	if _, _, err := holders.Break(ctx, cli, pfx, "job", la.Token()+1000, 0); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Break with a wrong token = %v, want ErrNotHeld", err)
	}
	if _, _, err := holders.Break(ctx, cli, pfx, "job", st.Waiters[0].Token, 0); !errors.Is(err, lock.ErrNotOwner) {
		t.Errorf("Break of a waiter's token = %v, want ErrNotOwner", err)
	}
	if _, _, err := holders.Break(ctx, cli, pfx, "job", fencing.Token(0), 0); !errors.Is(err, fencing.ErrInvalidToken) {
		t.Errorf("Break with token 0 = %v", err)
	}
	broken, err := holders.Force(ctx, cli, pfx, "job", la.Token())
	if err != nil || broken.Owner != "alice" {
		t.Fatalf("Break = %+v, %v", broken, err)
	}
	waitLost(t, la, nil, 10*time.Second, "it was broken")
	var lb acquired
	select {
	case lb = <-bob:
	case <-time.After(10 * time.Second):
		t.Fatal("bob did not take over")
	}
	if lb.err != nil {
		t.Fatalf("bob's Acquire = %v", lb.err)
	}
	if st, err := holders.Inspect(ctx, cli, pfx, "job"); err != nil || st.Holder == nil || st.Holder.Owner != "bob" || st.Holder.Token != lb.l.Token() {
		t.Fatalf("after the break: Inspect = %+v, %v; want bob holding with token %v", st, err, lb.l.Token())
	}
	if _, _, err := holders.Break(ctx, cli, pfx, "job", la.Token(), 0); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("second Break with the old token = %v, want ErrNotHeld (must not break bob)", err)
	}
}
