package kubelock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// Get returns AcquireTime and RenewTime to the microsecond, as the Lease
// lock does (a Lease's MicroTime), not in the whole seconds of a
// LeaderElectionRecord's JSON.
func TestRecordTimesKeepMicroseconds(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	a := newLock(t, cli, "a")
	ctx := ctxT(t)
	rec := record("a")
	rec.AcquireTime = metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 678901234, time.UTC))
	if err := a.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	rec.RenewTime = metav1.NewTime(rec.AcquireTime.Add(1500 * time.Millisecond))
	if err := a.Update(ctx, rec); err != nil {
		t.Fatal(err)
	}
	got, _, err := a.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		got, want metav1.Time
	}{{"AcquireTime", got.AcquireTime, rec.AcquireTime}, {"RenewTime", got.RenewTime, rec.RenewTime}} {
		if want := c.want.Truncate(time.Microsecond); !c.got.Time.Equal(want) {
			t.Errorf("%s = %v, want %v", c.name, c.got.UTC(), want.UTC())
		}
	}
}

// released is the record client-go's elector writes to release.
func released() rl.LeaderElectionRecord {
	now := metav1.NewTime(time.Now())
	return rl.LeaderElectionRecord{LeaseDurationSeconds: 1, AcquireTime: now, RenewTime: now}
}

// An Update — a renewal or a release — before the lock has read or
// written the record is a plain error, ErrNotRead, as the Lease lock's
// "lease not initialized" — not a conflict with a record it never saw.
func TestUpdateBeforeGetIsNotAConflict(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	a := newLock(t, cli, "a")
	for _, rec := range []rl.LeaderElectionRecord{record("a"), released()} {
		err := a.Update(ctxT(t), rec)
		if !errors.Is(err, ErrNotRead) || apierrors.IsConflict(err) {
			t.Errorf("Update of holder %q before Get = %v, want ErrNotRead and no conflict", rec.HolderIdentity, err)
		}
	}
}

// A release after the lock's own release is a no-op, as a second Update
// of a released Lease succeeds.
func TestReleaseAgainIsANoOp(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	a := newLock(t, cli, "a")
	ctx := ctxT(t)
	if err := a.Create(ctx, record("a")); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := a.Update(ctx, released()); err != nil {
			t.Fatalf("release %d = %v", i, err)
		}
	}
	if resp, err := cli.Get(ctx, a.Key()); err != nil || len(resp.Kvs) != 0 {
		t.Errorf("the record is still there after the release (%v)", err)
	}
}

// An Update naming another holder is a conflict, as the doc says: the
// lock writes only its own identity's record.
func TestUpdateOfAnotherHolderIsAConflict(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	a := newLock(t, cli, "a")
	ctx := ctxT(t)
	if err := a.Create(ctx, record("a")); err != nil {
		t.Fatal(err)
	}
	if err := a.Update(ctx, record("b")); !apierrors.IsConflict(err) {
		t.Errorf("Update of holder b = %v, want a conflict", err)
	}
}

// Error messages show a long name or identity cut short, not whole: a
// name may be MaxNameBytes long.
func TestErrorsClipLongNames(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	long := strings.Repeat("é", MaxNameBytes/2)
	l, err := New(cli, long, long, testTimings.elector(), lock.WithPrefix(prefix(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	ctx := ctxT(t)
	_, _, getErr := l.Get(ctx)
	if !apierrors.IsNotFound(getErr) {
		t.Fatalf("Get = %v, want NotFound", getErr)
	}
	renewErr := l.Update(ctx, record(long))
	otherErr := l.Update(ctx, record(long+"x"))
	for what, err := range map[string]error{"Get": getErr, "Update": renewErr, "Update of another": otherErr} {
		if err == nil {
			t.Errorf("%s succeeded", what)
			continue
		}
		if msg := err.Error(); len(msg) > 1024 || !utf8.ValidString(msg) {
			t.Errorf("%s's error is %d bytes (valid UTF-8: %v), want a clipped name", what, len(msg), utf8.ValidString(msg))
		}
	}
}

// An Update (a renewal or a release) after a Get that found no record is
// ErrNotRead too, as the
// Lease lock's "lease not initialized" after a Get of a missing Lease: the
// lock has no version of the record to update.
func TestUpdateAfterGetFoundNothingIsNotAConflict(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	a := newLock(t, cli, "a")
	ctx := ctxT(t)
	if _, _, err := a.Get(ctx); !apierrors.IsNotFound(err) {
		t.Fatalf("Get = %v, want NotFound", err)
	}
	for _, rec := range []rl.LeaderElectionRecord{record("a"), released()} {
		err := a.Update(ctx, rec)
		if !errors.Is(err, ErrNotRead) || apierrors.IsConflict(err) {
			t.Errorf("Update of holder %q after a Get that found nothing = %v, want ErrNotRead and no conflict", rec.HolderIdentity, err)
		}
	}
}

// New refuses a name or an identity that etcd could never store: every
// Create would fail.
func TestNewRefusesHugeNames(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	huge := strings.Repeat("x", 2<<20)
	for _, c := range []struct{ name, identity string }{{huge, "a"}, {"ctl", huge}} {
		if _, err := New(cli, c.name, c.identity, DefaultTimings); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("New with a %d-byte name and a %d-byte identity = %v, want ErrInvalidOption", len(c.name), len(c.identity), err)
		}
	}
	if _, err := New(cli, strings.Repeat("x", MaxNameBytes), "a", DefaultTimings); err != nil {
		t.Errorf("New with a name of MaxNameBytes = %v", err)
	}
}

// A second elector with the identity of the leader, on a lock of its own
// (a restarted pod whose predecessor's lease lives), waits for the record
// to end without an error in client-go's log: it does not take the record
// for its own.
func TestSameIdentityWaitsQuietly(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	// The first term must outlive the second elector's ten attempts on
	// a slow machine: nobody renews it.
	first, second := newLock(t, cli, "a", lock.WithTTL(time.Minute)), newLock(t, cli, "a")
	ctx := ctxT(t)
	create(t, ctx, first)
	gets := &countingLock{Lock: second, gets: make(chan struct{}, 100)}
	errs := &errorCount{}
	ectx, cancel := context.WithCancel(klog.NewContext(ctx, logr.New(errs)))
	defer cancel()
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: gets, LeaseDuration: testTimings.leaseDuration, RenewDeadline: testTimings.renewDeadline,
		RetryPeriod: 100 * time.Millisecond, Name: "ctl",
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { t.Error("the second elector led") },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		le.Run(ectx)
	}()
	for range 10 {
		<-gets.gets
	}
	cancel()
	<-done
	if n := errs.n.Load(); n > 0 {
		t.Errorf("client-go logged %d errors in 10 attempts, the last: %s", n, errs.last.Load())
	}
	rec, _, err := second.Get(ctx)
	if err != nil || rec.HolderIdentity == "a" {
		t.Errorf("the second lock's Get = %+v, %v: want the other lock's record under another holder name", rec, err)
	}
}

// countingLock signals every Get.
type countingLock struct {
	*Lock
	gets chan struct{}
}

func (c *countingLock) Get(ctx context.Context) (*rl.LeaderElectionRecord, []byte, error) {
	rec, raw, err := c.Lock.Get(ctx)
	select {
	case c.gets <- struct{}{}:
	default:
	}
	return rec, raw, err
}

// errorCount is a logr sink that counts errors.
type errorCount struct {
	n    atomic.Int64
	last atomic.Value
}

func (e *errorCount) Init(logr.RuntimeInfo)          {}
func (e *errorCount) Enabled(int) bool               { return true }
func (e *errorCount) Info(int, string, ...any)       {}
func (e *errorCount) WithValues(...any) logr.LogSink { return e }
func (e *errorCount) WithName(string) logr.LogSink   { return e }
func (e *errorCount) Error(err error, msg string, _ ...any) {
	e.n.Add(1)
	e.last.Store(fmt.Sprintf("%s: %v", msg, err))
}
