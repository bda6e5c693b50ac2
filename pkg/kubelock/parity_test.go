package kubelock

import (
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
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

// An Update before the lock has read or written the record is a plain
// error, ErrNotRead, as the Lease lock's "lease not initialized" — not a
// conflict with a record it never saw.
func TestUpdateBeforeGetIsNotAConflict(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	a := newLock(t, cli, "a")
	err := a.Update(ctxT(t), record("a"))
	if !errors.Is(err, ErrNotRead) || apierrors.IsConflict(err) {
		t.Fatalf("Update before Get = %v, want ErrNotRead and no conflict", err)
	}
}
