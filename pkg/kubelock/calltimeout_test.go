package kubelock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
)

// client-go's follower calls Get with a context that has no deadline. On
// a connection that carries nothing — a peer gone without a reset — such
// a call would wait for as long as the connection stays silent; bounded by
// Timings.CallTimeout it fails with context.DeadlineExceeded, and the
// elector tries again.
func TestCallWithoutDeadlineOnADeadConnectionTimesOut(t *testing.T) {
	t.Parallel()
	tm := timings{ttl: 2 * time.Second, leaseDuration: 1500 * time.Millisecond, renewDeadline: time.Second, retryPeriod: 300 * time.Millisecond}
	p, url := etcdtest.Proxy(t, cluster.Endpoints()[1])
	b := newLockFor(t, etcdtest.Client(t, url), "b", tm.elector())
	if _, _, err := b.Get(ctxT(t)); err == nil {
		t.Fatal("a record exists")
	}
	p.PauseTx()
	p.PauseRx()
	defer func() { p.UnpauseTx(); p.UnpauseRx() }()
	errc := make(chan error, 1)
	go func() {
		_, _, err := b.Get(context.Background())
		errc <- err
	}()
	select {
	case err := <-errc:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Get on a dead connection = %v, want context.DeadlineExceeded", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("Get on a dead connection still waits after 20s; CallTimeout is %v", tm.elector().CallTimeout())
	}
}

// Close on a dead connection returns within Timings.CallTimeout, also
// with a context that has no deadline: the term ends at once, and etcd
// expires the lease it could not revoke.
func TestCloseOnADeadConnectionReturns(t *testing.T) {
	t.Parallel()
	tm := timings{ttl: 2 * time.Second, leaseDuration: 1500 * time.Millisecond, renewDeadline: time.Second, retryPeriod: 300 * time.Millisecond}
	p, url := etcdtest.Proxy(t, cluster.Endpoints()[1])
	b := newLockFor(t, etcdtest.Client(t, url), "b", tm.elector())
	if err := b.Create(ctxT(t), record("b")); err != nil {
		t.Fatal(err)
	}
	term := mustTerm(t, b)
	p.PauseTx()
	p.PauseRx()
	defer func() { p.UnpauseTx(); p.UnpauseRx() }()
	errc := make(chan error, 1)
	go func() { errc <- b.Close(context.Background()) }()
	select {
	case err := <-errc:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Close on a dead connection = %v, want context.DeadlineExceeded (the revoke timed out)", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("Close on a dead connection still waits after 20s; CallTimeout is %v", tm.elector().CallTimeout())
	}
	if cause := context.Cause(term.Context()); !errors.Is(cause, ErrClosed) {
		t.Errorf("term's cause after Close = %v, want ErrClosed", cause)
	}
}

// The zero Term, returned with ErrNoTerm, is usable: no token, and a
// context that has ended with ErrNoTerm.
func TestZeroTermHasEnded(t *testing.T) {
	t.Parallel()
	var term Term
	if term.Token() != 0 || !term.Started().IsZero() {
		t.Errorf("zero Term: token %v, started %v", term.Token(), term.Started())
	}
	if cause := context.Cause(term.Context()); !errors.Is(cause, ErrNoTerm) {
		t.Errorf("zero Term's context cause = %v, want ErrNoTerm", cause)
	}
	ctx, cancel := term.Bind(context.Background())
	defer cancel()
	if !errors.Is(context.Cause(ctx), ErrNoTerm) {
		t.Errorf("zero Term's Bind cause = %v, want ErrNoTerm", context.Cause(ctx))
	}
}
