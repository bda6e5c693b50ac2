package kubelock

import (
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"
	evrecord "k8s.io/client-go/tools/record"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/kubelock/internal/kubetest"
	"github.com/etcdlock/etcdlock/pkg/kuberecord"
)

// stale fails only an elector that leads past its term by more than
// allowed.
func TestStale(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		name    string
		leading bool
		ended   time.Time
		fails   bool
	}{
		{"follower", false, now.Add(-time.Hour), false},
		{"live term", true, time.Time{}, false},
		{"ended within the allowance", true, now.Add(-time.Second), false},
		{"ended long ago", true, now.Add(-3 * time.Second), true},
	} {
		if err := stale(c.leading, c.ended, now, 2*time.Second, 7); (err != nil) != c.fails {
			t.Errorf("%s: stale = %v, want failure %v", c.name, err, c.fails)
		}
	}
}

// The health check passes while the elector leads a live term, and
// fails once it still leads long after its term ended — a process whose
// leadership is over but that runs on; it passes again when the elector
// stops leading.
func TestHealthzFailsWhileLeadingAnEndedTerm(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	short := Timings{LeaseDuration: 1500 * time.Millisecond, RenewDeadline: time.Second, RetryPeriod: 300 * time.Millisecond}
	a := newLockFor(t, cli, "a", short)
	h := a.Healthz(0)
	if h.Name() != "leaderElection" {
		t.Errorf("Name = %q", h.Name())
	}
	ctx := ctxT(t)
	term := create(t, ctx, a)
	a.RecordEvent(eventBecameLeader)
	if err := h.Check(nil); err != nil {
		t.Fatalf("Check while leading a live term = %v", err)
	}
	if _, err := cli.Delete(ctx, a.Key()); err != nil {
		t.Fatal(err)
	}
	waitEnded(t, term, 10*time.Second)
	kubetest.WaitFor(t, nil, 10*time.Second, "a failing check", func() bool { return h.Check(nil) != nil })
	t.Log(h.Check(nil))
	a.RecordEvent(eventStoppedLeader)
	if err := h.Check(nil); err != nil {
		t.Errorf("Check after the elector stopped leading = %v", err)
	}
}

// LeaderTransitions counts the terms before the current one, as a
// Lease's counts takeovers: every term starts with a Create, and the
// count outlives the records.
func TestLeaderTransitionsCounted(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	a, b := newLock(t, cli, "a"), newLock(t, cli, "b")
	ctx := ctxT(t)
	for i, l := range []*Lock{a, b, a} {
		if _, _, err := l.Get(ctx); !apierrors.IsNotFound(err) {
			t.Fatalf("Get = %v, want NotFound", err)
		}
		create(t, ctx, l)
		if err := l.Update(ctx, record(l.Identity())); err != nil {
			t.Fatal(err)
		}
		rec, _, err := l.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if rec.LeaderTransitions != i {
			t.Errorf("term %d: LeaderTransitions = %d, want %d", i, rec.LeaderTransitions, i)
		}
		if err := l.Update(ctx, rl.LeaderElectionRecord{}); err != nil { // release
			t.Fatal(err)
		}
	}
}

// Events go to the recorder given, as the Lease lock posts them.
func TestEventsPosted(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	rec := evrecord.NewFakeRecorder(10)
	a := newLock(t, cli, "a")
	if err := a.SetEventRecorder(rec, "ns"); err != nil {
		t.Fatal(err)
	}
	a.RecordEvent("became leader")
	a.RecordEvent("stopped leading")
	for _, want := range []string{"Normal LeaderElection a became leader", "Normal LeaderElection a stopped leading"} {
		if got := <-rec.Events; !strings.HasPrefix(got, want) {
			t.Errorf("event %q, want %q", got, want)
		}
	}
	if err := a.SetEventRecorder(nil, ""); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("nil recorder: SetEventRecorder = %v, want ErrInvalidOption", err)
	}
}

// The record as the lock stores it is what package kuberecord, the
// etcdlock command's reader, decodes.
func TestRecordLayoutIsKuberecords(t *testing.T) {
	ler := record("a")
	ler.LeaderTransitions = 4
	value, err := encode(ler, 0x694d, 3)
	if err != nil {
		t.Fatal(err)
	}
	got, err := kuberecord.Decode("k", value)
	if err != nil {
		t.Fatal(err)
	}
	if got.HolderIdentity != "a" || got.LeaderTransitions != 4 || got.LeaseDurationSeconds != ler.LeaseDurationSeconds ||
		got.Term.Lease != "694d" || got.Term.Renewals != 3 ||
		!got.Acquired().Equal(ler.AcquireTime.Truncate(time.Microsecond)) || !got.Renewed().Equal(ler.RenewTime.Truncate(time.Microsecond)) {
		t.Errorf("kuberecord.Decode = %+v, want %+v", got, ler)
	}
	if DefaultPrefix != kuberecord.DefaultPrefix {
		t.Errorf("DefaultPrefix %q, kuberecord's %q", DefaultPrefix, kuberecord.DefaultPrefix)
	}
}
