package kubelock

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/etcdlock/etcdlock/pkg/clock"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

func TestNewRejectsBadInput(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	cases := map[string]func() (*Lock, error){
		"nil client":     func() (*Lock, error) { return New(nil, "ctl", "a", DefaultTimings) },
		"empty name":     func() (*Lock, error) { return New(cli, "", "a", DefaultTimings) },
		"NUL in name":    func() (*Lock, error) { return New(cli, "c\x00", "a", DefaultTimings) },
		"empty identity": func() (*Lock, error) { return New(cli, "ctl", "", DefaultTimings) },
		"nil option":     func() (*Lock, error) { return New(cli, "ctl", "a", DefaultTimings, nil) },
		"prefix no /":    func() (*Lock, error) { return New(cli, "ctl", "a", DefaultTimings, lock.WithPrefix("/x")) },
		"relative":       func() (*Lock, error) { return New(cli, "ctl", "a", DefaultTimings, lock.WithPrefix("x/")) },
		"TTL 0":          func() (*Lock, error) { return New(cli, "ctl", "a", DefaultTimings, lock.WithTTL(0)) },
		"TTL huge": func() (*Lock, error) {
			return New(cli, "ctl", "a", DefaultTimings, lock.WithTTL(9_000_000_001*time.Second))
		},
		"margin 0": func() (*Lock, error) { return New(cli, "ctl", "a", DefaultTimings, lock.WithSafetyMargin(0)) },
		"margin >= TTL": func() (*Lock, error) {
			return New(cli, "ctl", "a", DefaultTimings, lock.WithTTL(2*time.Second), lock.WithSafetyMargin(2*time.Second))
		},
		"cleanup 0":  func() (*Lock, error) { return New(cli, "ctl", "a", DefaultTimings, lock.WithCleanupTimeout(0)) },
		"nil logger": func() (*Lock, error) { return New(cli, "ctl", "a", DefaultTimings, lock.WithLogger(nil)) },
		// Session options a Lock has no use for are rejected, not ignored.
		"owner": func() (*Lock, error) { return New(cli, "ctl", "a", DefaultTimings, lock.WithOwner("b")) },
		"renew interval": func() (*Lock, error) {
			return New(cli, "ctl", "a", DefaultTimings, lock.WithRenewInterval(time.Second))
		},
		"clock":      func() (*Lock, error) { return New(cli, "ctl", "a", DefaultTimings, lock.WithClock(clock.Real())) },
		"lock delay": func() (*Lock, error) { return New(cli, "ctl", "a", DefaultTimings, lock.WithLockDelay(time.Second)) },
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			if l, err := f(); !errors.Is(err, ErrInvalidOption) {
				t.Errorf("New = %v, %v; want ErrInvalidOption", l, err)
			}
		})
	}
}

// client-go creates the record when Get reports it missing; Create must
// succeed only while the key is absent.
func TestGetMissingThenCreateOnce(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	// a's term must outlive b's Create on a slow machine: nobody renews
	// it, and a term ends TTL − margin after its Create was sent.
	a, b := newLock(t, cli, "a", lock.WithTTL(time.Minute)), newLock(t, cli, "b")
	ctx := ctxT(t)
	if _, _, err := a.Get(ctx); !apierrors.IsNotFound(err) {
		t.Fatalf("Get of a missing record = %v, want IsNotFound", err)
	}
	if err := a.Create(ctx, record("a")); err != nil {
		t.Fatal(err)
	}
	if err := b.Create(ctx, record("b")); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second Create = %v, want IsAlreadyExists", err)
	}
	rec, _, err := b.Get(ctx)
	if err != nil || rec.HolderIdentity != "a" {
		t.Fatalf("Get = %+v, %v; want holder a", rec, err)
	}
	resp, err := cli.Get(ctx, a.Key())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("key %s: %v %v", a.Key(), resp, err)
	}
	if got, want := int64(mustTerm(t, a).Token()), resp.Kvs[0].CreateRevision; got != want {
		t.Errorf("token %d, want the key's create revision %d", got, want)
	}
	if _, err := b.Term(); !errors.Is(err, ErrNoTerm) {
		t.Errorf("b.Term() = %v, want ErrNoTerm", err)
	}
}

// client-go's followers see a live leader only while the raw bytes change:
// every renewal must change them, even with an equal record.
func TestRawRecordChangesOnEveryRenewal(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	a := newLock(t, cli, "a")
	ctx := ctxT(t)
	rec := record("a")
	if err := a.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i := range 5 {
		_, raw, err := a.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if seen[string(raw)] {
			t.Fatalf("renewal %d: raw record %s seen before", i, raw)
		}
		seen[string(raw)] = true
		if err := a.Update(ctx, rec); err != nil {
			t.Fatalf("renewal %d: %v", i, err)
		}
	}
}

// Update writes only if the record is unchanged since this lock last read
// or wrote it; a change by anyone else ends the term.
func TestUpdateConflictsWithAChangedRecord(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	a, b := newLock(t, cli, "a"), newLock(t, cli, "b")
	ctx := ctxT(t)
	term := create(t, ctx, a)
	if _, _, err := b.Get(ctx); err != nil {
		t.Fatal(err)
	}
	// b, a follower, may not take over a record a's lease holds.
	if err := b.Update(ctx, record("b")); !apierrors.IsConflict(err) {
		t.Fatalf("takeover by b = %v, want IsConflict", err)
	}
	if _, err := cli.Put(ctx, a.Key(), `{"holderIdentity":"intruder"}`); err != nil {
		t.Fatal(err)
	}
	if err := a.Update(ctx, record("a")); !apierrors.IsConflict(err) {
		t.Fatalf("renewal over a changed record = %v, want IsConflict", err)
	}
	if cause := waitEnded(t, term, 5*time.Second); !errors.Is(cause, ErrRecordGone) {
		t.Errorf("term ended with %v, want ErrRecordGone", cause)
	}
	resp, err := cli.Get(ctx, a.Key())
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != `{"holderIdentity":"intruder"}` {
		t.Errorf("the other writer's record was changed: %v %v", resp, err)
	}
}

// client-go's ReleaseOnCancel writes a record with no holder: the term ends
// before the record is deleted, and the next candidate can create it.
func TestReleaseEndsTermThenDeletesRecord(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	a, b := newLock(t, cli, "a"), newLock(t, cli, "b")
	ctx := ctxT(t)
	term := create(t, ctx, a)
	w := cli.Watch(ctx, a.Key(), clientv3.WithRev(int64(term.Token())+1))
	released := rl.LeaderElectionRecord{LeaseDurationSeconds: 1}
	if err := a.Update(ctx, released); err != nil {
		t.Fatal(err)
	}
	if cause := context.Cause(term.Context()); !errors.Is(cause, ErrReleased) {
		t.Fatalf("after release the term's cause is %v, want ErrReleased", cause)
	}
	ended := term.t.ended
	wr := <-w
	if len(wr.Events) != 1 || wr.Events[0].Type != clientv3.EventTypeDelete {
		t.Fatalf("watch: %+v", wr)
	}
	if err := b.Create(ctx, record("b")); err != nil {
		t.Fatalf("create after release: %v", err)
	}
	if next := mustTerm(t, b); next.Token() <= term.Token() || !next.Started().After(ended) {
		t.Errorf("next term token %v started %v; previous token %v ended %v", next.Token(), next.Started(), term.Token(), ended)
	}
	// A retried release, and a release by a lock whose record it is not,
	// change nothing.
	if err := a.Update(ctx, released); err != nil {
		t.Errorf("retried release: %v", err)
	}
	if _, _, err := b.Get(ctx); err != nil {
		t.Errorf("b's record after a's retried release: %v", err)
	}
}

// A holder that stops renewing loses its term at the conservative
// deadline, before etcd deletes the record.
func TestTermEndsBeforeEtcdExpiresTheLease(t *testing.T) {
	t.Parallel()
	// a reaches etcd through a proxy that is cut after the Create, so
	// that nothing a does — renewal or revoke — reaches etcd: the record
	// goes when etcd expires the lease.
	p, url := etcdtest.Proxy(t, cluster.Endpoints()[0])
	a := newLock(t, etcdtest.Client(t, url), "a", lock.WithCleanupTimeout(100*time.Millisecond))
	ctx := ctxT(t)
	term := create(t, ctx, a)
	w := etcdtest.Client(t, cluster.Endpoints()...).Watch(ctx, a.Key(), clientv3.WithRev(int64(term.Token())+1))
	p.BlackholeTx()
	p.BlackholeRx()
	if cause := waitEnded(t, term, 10*time.Second); !errors.Is(cause, ErrDeadline) {
		t.Fatalf("term ended with %v, want ErrDeadline", cause)
	}
	wr := <-w
	deleted := time.Now()
	if len(wr.Events) != 1 || wr.Events[0].Type != clientv3.EventTypeDelete {
		t.Fatalf("watch: %+v", wr)
	}
	ended := term.t.ended
	if !ended.Before(deleted) {
		t.Errorf("term ended at %v, after etcd deleted the record at %v", ended, deleted)
	}
	t.Logf("term ended %v before etcd deleted the record", deleted.Sub(ended).Round(time.Millisecond))
	p.UnblackholeTx()
	p.UnblackholeRx()
}

// While the elector leads, a record that vanished under its term does not
// start a new term: the elector must see the loss.
func TestNoNewTermWhileTheElectorLeads(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	a := newLock(t, cli, "a")
	ctx := ctxT(t)
	if err := a.Create(ctx, record("a")); err != nil {
		t.Fatal(err)
	}
	a.RecordEvent(eventBecameLeader)
	first := mustTerm(t, a)
	if _, err := cli.Delete(ctx, a.Key()); err != nil {
		t.Fatal(err)
	}
	if cause := waitEnded(t, first, 5*time.Second); !errors.Is(cause, ErrRecordGone) {
		t.Fatalf("term ended with %v, want ErrRecordGone", cause)
	}
	if err := a.Create(ctx, record("a")); !errors.Is(err, ErrStillLeading) {
		t.Fatalf("Create while leading = %v, want ErrStillLeading", err)
	}
	a.RecordEvent(eventStoppedLeader)
	if err := a.Create(ctx, record("a")); err != nil {
		t.Fatalf("Create after the elector stopped leading: %v", err)
	}
	if second := mustTerm(t, a); second.Token() <= first.Token() {
		t.Errorf("second term's token %v, want above %v", second.Token(), first.Token())
	}
}

// A restarted candidate with the same identity does not adopt the record
// an earlier process's lease holds; it gets it once that lease ends.
func TestSameIdentityDoesNotAdoptAnotherLease(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	old, restarted := newLock(t, cli, "a"), newLock(t, cli, "a")
	ctx := ctxT(t)
	if err := old.Create(ctx, record("a")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := restarted.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if err := restarted.Update(ctx, record("a")); !apierrors.IsConflict(err) {
		t.Fatalf("Update of an earlier lease's record = %v, want IsConflict", err)
	}
	if err := restarted.Update(ctx, rl.LeaderElectionRecord{}); err != nil {
		t.Fatalf("release of a record that is not this lock's: %v", err)
	}
	if _, _, err := restarted.Get(ctx); err != nil {
		t.Fatalf("the earlier lease's record was released by another lock: %v", err)
	}
	if err := old.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := restarted.Get(ctx); !apierrors.IsNotFound(err) {
		t.Fatalf("after Close: %v, want IsNotFound", err)
	}
	if err := restarted.Create(ctx, record("a")); err != nil {
		t.Fatal(err)
	}
	if err := old.Create(ctx, record("a")); !errors.Is(err, ErrClosed) {
		t.Errorf("Create after Close = %v, want ErrClosed", err)
	}
}
