package ctrlmanager_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	fakecoordination "k8s.io/client-go/kubernetes/typed/coordination/v1/fake"
	k8stesting "k8s.io/client-go/testing"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/etcdlock/etcdlock/pkg/kubelock"
	"github.com/etcdlock/etcdlock/pkg/kubelock/internal/kubetest"
)

// leaseServer is client-go's fake coordination client, in memory, with
// an API server's optimistic concurrency, which the fake lacks: every
// write gives the Lease a new resourceVersion, and an Update that does not
// carry the stored one fails with a conflict.
type leaseServer struct {
	client *fakecoordination.FakeCoordinationV1
	mu     sync.Mutex // guards rv; the fake runs one reaction at a time anyway
	rv     int
}

const leaseName = "ctl"

func newLeaseServer() *leaseServer {
	tracker := k8stesting.NewObjectTracker(scheme.Scheme, scheme.Codecs.UniversalDecoder())
	fake := &k8stesting.Fake{}
	s := &leaseServer{client: &fakecoordination.FakeCoordinationV1{Fake: fake}}
	fake.AddReactor("create", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s.stamp(a.(k8stesting.CreateAction).GetObject())
		return false, nil, nil
	})
	fake.AddReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj := a.(k8stesting.UpdateAction).GetObject()
		lease := obj.(*coordinationv1.Lease)
		stored, err := tracker.Get(a.GetResource(), a.GetNamespace(), lease.Name)
		if err != nil {
			return true, nil, err
		}
		if rv := stored.(*coordinationv1.Lease).ResourceVersion; rv != lease.ResourceVersion {
			return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), lease.Name,
				fmt.Errorf("resourceVersion %q, stored %q", lease.ResourceVersion, rv))
		}
		s.stamp(obj)
		return false, nil, nil
	})
	fake.AddReactor("*", "*", k8stesting.ObjectReaction(tracker))
	return s
}

func (s *leaseServer) stamp(obj runtime.Object) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv++
	obj.(*coordinationv1.Lease).ResourceVersion = fmt.Sprint(s.rv)
}

// lock returns a Lease lock of identity who on the server.
func (s *leaseServer) lock(who string) *rl.LeaseLock {
	return &rl.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: "default", Name: leaseName},
		Client:     s.client,
		LockConfig: rl.ResourceLockConfig{Identity: who},
	}
}

// holder returns the Lease's holder, and whether the Lease exists.
func (s *leaseServer) holder() (string, bool) {
	l, err := s.client.Leases("default").Get(context.Background(), leaseName, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return "", err == nil
	}
	return *l.Spec.HolderIdentity, true
}

// leaseCandidate is a candidate on client-go's Lease lock, set up as
// controller-runtime documents it (LeaderElection, the lock, the
// durations, ReleaseOnCancel as given), reaching the API server through a
// gate.
type leaseCandidate struct {
	*candidate
	gate *kubetest.Gate
}

func newLeaseCandidate(srv *leaseServer, who string, tm kubelock.Timings, release bool) *leaseCandidate {
	c := &leaseCandidate{gate: kubetest.NewGate(srv.lock(who))}
	c.candidate = &candidate{who: who, start: func() (incarnation, error) {
		// A new process has a new lock, which has read nothing yet.
		c.gate.Use(srv.lock(who))
		return incarnation{opts: manager.Options{
			LeaderElection:                      true,
			LeaderElectionResourceLockInterface: c.gate,
			LeaderElectionReleaseOnCancel:       release,
			LeaseDuration:                       &tm.LeaseDuration,
			RenewDeadline:                       &tm.RenewDeadline,
			RetryPeriod:                         &tm.RetryPeriod,
		}, close: func() {}}, nil
	}}
	return c
}

// leaseFaults are the faults of a leader on client-go's Lease lock, each
// the counterpart of etcdFaults' fault of the same name: partitioned from
// the API server (its calls hang), its Lease deleted by hand (kubectl
// delete lease), its API calls refused at once (as an etcd client closed:
// every call fails), its manager stopped (released or not), crashed (cut
// off and its manager gone at once).
func leaseFaults(t testing.TB, srv *leaseServer, cands map[string]*leaseCandidate) map[string]fault {
	return map[string]fault{
		"partition": func(who string) outcome {
			cands[who].gate.Cut()
			return outcome{heal: cands[who].gate.Heal}
		},
		"delete": func(who string) outcome {
			if err := srv.client.Leases("default").Delete(context.Background(), leaseName, metav1.DeleteOptions{}); err != nil {
				t.Error(err)
			}
			// client-go's leader creates a missing Lease again on its next
			// renewal, unless a follower created it first.
			return outcome{kept: func() bool { h, ok := srv.holder(); return ok && h == who }}
		},
		"close": func(who string) outcome {
			cands[who].gate.Refuse()
			return outcome{heal: cands[who].gate.Heal}
		},
		"crash": func(who string) outcome {
			cands[who].gate.Cut()
			cands[who].down()
			return outcome{heal: func() { cands[who].gate.Heal(); cands[who].up() }}
		},
		"stop": func(who string) outcome { cands[who].down(); return outcome{heal: cands[who].up} },
	}
}

// runLeaseManagers runs three candidates on client-go's Lease lock with
// durations tm (one of them does not release when stopped) and applies
// the faults pick names until terms runs have started; it returns the
// work log and what the faults did.
func runLeaseManagers(t testing.TB, tm kubelock.Timings, terms int, pick func() string) (*workLog, failovers) {
	srv := newLeaseServer()
	log := newWorkLog()
	cfg := kubetest.NoAPIServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	cands := map[string]*leaseCandidate{}
	for i := range 3 {
		who := fmt.Sprintf("m%d", i)
		cands[who] = newLeaseCandidate(srv, who, tm, i != 2)
		cands[who].run(t, ctx, &wg, cfg, log)
	}
	within := 10 * (tm.LeaseDuration + 2*tm.RenewDeadline)
	took := drive(t, log, pick, terms, within, leaseFaults(t, srv, cands))
	for _, c := range cands {
		c.gate.Heal()
	}
	return log, took
}

// The negative control with client-go's Lease lock (on client-go's fake
// clientset) in a configuration known to overlap: a partitioned leader
// whose calls hang. It stops leading RetryPeriod + RenewDeadline after its
// last renewal and returns from its release another RenewDeadline later,
// while a follower takes over LeaseDuration after it last saw the Lease
// change. KUBELOCK_MANAGER_DEFAULTS=1 runs it with the default durations.
func TestLeaseLockOverlapsUnderPartition(t *testing.T) {
	t.Parallel()
	tm := kubelock.Timings{LeaseDuration: 1200 * time.Millisecond, RenewDeadline: time.Second, RetryPeriod: 200 * time.Millisecond}
	if os.Getenv("KUBELOCK_MANAGER_DEFAULTS") == "1" {
		tm = kubelock.DefaultTimings
	}
	t.Logf("%v", tm)
	log, took := runLeaseManagers(t, tm, 3, inTurn("partition"))
	took.report(t)
	mustOverlap(t, log, "client-go's Lease lock")
}
