package integration

import (
	"cmp"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/etcdlock/etcdlock/pkg/embedded"
)

// TestFaultSuite is the short fault suite that `make test` runs: fixed
// seeds, a few seconds each, beside the package's other parallel tests.
// The checked runs, whose faults crash members and restart the cluster,
// take turns on one 3-member cluster (its stop takes seconds). The
// negative controls meet only their own workers' pauses, so they run side
// by side on a second cluster, where no other run's crash or leader
// change extends the leases whose expiry their hazard needs.
// `make chaos` runs TestChaos with CHAOS_RUNS and CHAOS_SEED.
func TestFaultSuite(t *testing.T) {
	t.Parallel()
	t.Run("checked", func(t *testing.T) {
		t.Parallel()
		c := chaosCluster(t)
		t.Run("mutex", func(t *testing.T) { faultSuiteMutex(t, c) })
		t.Run("beyond-mutex", func(t *testing.T) { faultSuiteBeyondMutex(t, c) })
	})
	t.Run("controls", func(t *testing.T) {
		t.Parallel()
		c := chaosCluster(t)
		t.Run("mutex", func(t *testing.T) { faultSuiteMutexControls(t, c) })
		t.Run("beyond-mutex", func(t *testing.T) { faultSuiteBeyondMutexControls(t, c) })
	})
}

// faultSuiteMutex runs the mutex with every fault.
func faultSuiteMutex(t *testing.T, c *embedded.Cluster) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
			r := runChaos(t, chaosConfig{cluster: c, prefix: chaosPrefix(t), seed: seed, workers: 4, names: []string{"a", "b"}, duration: 8 * time.Second, ttl: 2 * time.Second})
			t.Log(r)
			if r.violations() != 0 || r.check != porcupine.Ok {
				t.Errorf("violations in %v (porcupine: %s, visualization %s)", r, r.check, r.visualization)
			}
			if r.minLead < 0 && r.faults["pause"]+r.faults["partition"] > 0 {
				t.Logf("no holder lost its lock by deadline in this run")
			}
		})
	}
}

// beyondMutexKinds are the kinds beyond the mutex that the suite runs.
var beyondMutexKinds = []string{kindSemaphore, kindRWLock, kindMulti, kindDelay}

// beyondMutexConfig is t's run of kind under control (controlNone: the
// checked run).
func beyondMutexConfig(c *embedded.Cluster, t *testing.T, kind, control string) chaosConfig {
	cfg := chaosConfig{cluster: c, prefix: chaosPrefix(t), kind: kind, limit: 2, seed: 21, workers: 5, names: []string{"a", "b"}, duration: 8 * time.Second, ttl: 2 * time.Second, control: control}
	if kind == kindDelay {
		cfg.seed = 22 // its faults end two holders uncleanly, for the check to see
	}
	if control != controlNone {
		cfg.duration = 6 * time.Second // the control's pauses come first
		if kind != kindMulti {
			cfg.names = []string{"a"}
		}
	}
	return cfg
}

// faultSuiteBeyondMutex runs a semaphore of limit 2, a read-write lock,
// AcquireAll and a lock-delay with the mutex's invariants adapted: at most
// one holder per slot (so at most the limit per name), readers or one
// writer, every name of a set held alone and created at the set's token
// (all or none), tokens increasing per slot or name, fenced writes
// linearizable per slot or name, no holder sooner than the delay after an
// unclean end.
func faultSuiteBeyondMutex(t *testing.T, c *embedded.Cluster) {
	for _, kind := range beyondMutexKinds {
		t.Run(kind, func(t *testing.T) {
			r := runChaos(t, beyondMutexConfig(c, t, kind, controlNone))
			t.Log(r)
			if r.violations() != 0 || r.check != porcupine.Ok {
				t.Errorf("violations in %v (porcupine: %s, visualization %s)", r, r.check, r.visualization)
			}
		})
	}
}

// faultSuiteBeyondMutexControls breaks, for each kind beyond the mutex,
// the deadline and the fencing, takes a set's names one at a time, and
// skips the lock-delay, side by side; the checks must catch each.
func faultSuiteBeyondMutexControls(t *testing.T, c *embedded.Cluster) {
	for _, kind := range beyondMutexKinds {
		controls := []string{controlNoDeadline, controlUnfenced}
		switch kind {
		case kindMulti:
			controls = append(controls, controlSerialSet)
		case kindDelay:
			controls = []string{controlNoDelay}
		}
		for _, control := range controls {
			t.Run(kind+"/"+control, func(t *testing.T) {
				t.Parallel()
				runControl(t, beyondMutexConfig(c, t, kind, control))
			})
		}
	}
}

// faultSuiteMutexControls breaks one of the mutex's safety mechanisms per
// run, on purpose, side by side; the checks must catch each within
// controlOps operations, or the suite proves nothing.
func faultSuiteMutexControls(t *testing.T, c *embedded.Cluster) {
	for _, control := range []string{controlUnfenced, controlNoDeadline, controlReleaseByName} {
		t.Run(control, func(t *testing.T) {
			t.Parallel()
			runControl(t, chaosConfig{cluster: c, prefix: chaosPrefix(t), seed: 7, workers: 4, names: []string{"a"}, duration: 8 * time.Second, ttl: 2 * time.Second, control: control})
		})
	}
}

// controlOps bounds a negative control in operations, not in time: a
// loaded machine makes fewer operations in a round, and so meets the
// control's hazard less often, but it gets as many chances as a quiet one.
// controlRounds stops a machine so loaded that rounds make no operation.
const (
	controlOps    = 100
	controlRounds = 30
)

// runControl runs cfg's negative control round after round (seed, seed+1,
// and so on, each under a prefix of its own) until the checks catch it,
// and fails t if they have not after controlOps operations.
func runControl(t *testing.T, cfg chaosConfig) {
	t.Helper()
	prefix, seed, ops := cfg.prefix, cfg.seed, 0
	for round := 0; ops < controlOps; round++ {
		if round == controlRounds {
			t.Fatalf("negative control %q: %d rounds made only %d operations", cfg.control, round, ops)
		}
		cfg.prefix, cfg.seed = fmt.Sprintf("%sround-%d/", prefix, round), seed+uint64(round)
		r := runChaos(t, cfg)
		t.Log(r)
		if detected(r) {
			return
		}
		ops += r.ops
	}
	t.Errorf("negative control %q went unnoticed in %d operations", cfg.control, ops)
}

// chaosPrefix is the key prefix of t's run, on a cluster other runs use.
func chaosPrefix(t *testing.T) string { return "/chaos/" + t.Name() + "/" }

// detected reports whether the checks caught the control's breakage.
func detected(r chaosResult) bool {
	switch r.control {
	case controlUnfenced:
		return r.staleAccepted > 0 || r.check == porcupine.Illegal
	case controlNoDeadline:
		return r.doubleGrants > 0
	case controlReleaseByName:
		return r.badReleases > 0
	case controlSerialSet:
		return r.partialSets > 0
	case controlNoDelay:
		return r.shortDelays > 0
	}
	return false
}

// TestChaos is `make chaos`: CHAOS_RUNS randomized runs from CHAOS_SEED on
// one 3-member cluster, cycling through a mutex, a semaphore of limit 2,
// a read-write lock, AcquireAll and a lock-delay; every tenth run is a
// negative control (cycling through chaosControls). It ends with a
// totals table.
func TestChaos(t *testing.T) {
	runs, seed := longRuns(t, "CHAOS")
	fmt.Printf("CHAOS_SEED=%d CHAOS_RUNS=%d\n", seed, runs)
	c := chaosCluster(t)
	var tot chaosTotals
	tot.faults = map[string]int{}
	start := time.Now()
	for i := range runs {
		kind := []string{kindMutex, kindSemaphore, kindRWLock, kindMulti, kindDelay}[i%5]
		var control string
		if i%10 == 9 {
			pair := chaosControls[(i/10)%len(chaosControls)]
			kind, control = pair[0], pair[1]
		}
		cfg := chaosConfig{kind: kind, control: control, limit: 2, cluster: c, seed: seed + uint64(i), workers: 4, names: []string{"a", "b"}, duration: 4 * time.Second, ttl: 2 * time.Second}
		if kind == kindDelay {
			cfg.duration = 8 * time.Second // room for an expiry and a delay after it
		}
		if control != controlNone && kind != kindMulti {
			cfg.names = []string{"a"}
		}
		r := runChaos(t, cfg)
		fmt.Printf("run %d/%d %v\n", i+1, runs, r)
		tot.add(r)
		if r.control == controlNone && r.violations() > 0 {
			t.Errorf("run %d: violations (reproduce with CHAOS_SEED=%d CHAOS_RUNS=1); visualization: %s", i+1, r.seed, r.visualization)
		}
		if r.control != controlNone && !detected(r) {
			t.Errorf("run %d: negative control %q went unnoticed", i+1, r.control)
		}
	}
	fmt.Print(tot.table(time.Since(start)))
}

// chaosControls are the kinds and controls of make chaos's control runs,
// in turn: every control of every kind.
var chaosControls = [][2]string{
	{kindMutex, controlUnfenced}, {kindSemaphore, controlNoDeadline}, {kindRWLock, controlUnfenced},
	{kindMulti, controlSerialSet}, {kindDelay, controlNoDelay}, {kindMutex, controlNoDeadline},
	{kindSemaphore, controlUnfenced}, {kindRWLock, controlNoDeadline}, {kindMulti, controlUnfenced},
	{kindMutex, controlReleaseByName}, {kindMulti, controlNoDeadline},
}

type chaosTotals struct {
	runs, controlRuns, controlsDetected int
	faults                              map[string]int
	ops, ok, illegal, unknown           int
	staleAttempted, staleRejected       int
	staleAccepted, doubleGrants         int
	tokenRegressions, badReleases       int
	overLimit, partialSets, shortDelays int
	uncleanEnds                         int
	kinds                               map[string]int
	earlyDeletes, hashMismatches        int
	minLead, maxStuck                   time.Duration
	minLeadSet                          bool
}

func (t *chaosTotals) add(r chaosResult) {
	t.runs++
	if t.kinds == nil {
		t.kinds = map[string]int{}
	}
	t.kinds[cmp.Or(r.kind, "mutex")]++
	for k, v := range r.faults {
		t.faults[k] += v
	}
	if r.control != controlNone {
		t.controlRuns++
		if detected(r) {
			t.controlsDetected++
		}
		return // a control's violations are the point, not findings
	}
	t.ops += r.ops
	switch r.check {
	case porcupine.Ok:
		t.ok++
	case porcupine.Illegal:
		t.illegal++
	default:
		t.unknown++
	}
	t.staleAttempted += r.staleAttempted
	t.staleRejected += r.staleRejected
	t.staleAccepted += r.staleAccepted
	t.doubleGrants += r.doubleGrants
	t.tokenRegressions += r.tokenRegressions
	t.badReleases += r.badReleases
	t.overLimit += r.overLimit
	t.partialSets += r.partialSets
	t.shortDelays += r.shortDelays
	t.uncleanEnds += r.uncleanEnds
	t.earlyDeletes += r.earlyDeletes
	if !r.hashesEqual {
		t.hashMismatches++
	}
	if r.minLead >= 0 && (!t.minLeadSet || r.minLead < t.minLead) {
		t.minLead, t.minLeadSet = r.minLead, true
	}
	t.maxStuck = max(t.maxStuck, r.maxStuck)
}

func (t *chaosTotals) table(took time.Duration) string {
	tab := newTotalsTable("chaos totals", t.runs, t.controlRuns, took)
	row := tab.row
	tab.counts("runs: ", t.kinds)
	tab.counts("faults: ", t.faults)
	row("operations checked", t.ops)
	row("histories Ok / Illegal / Unknown", fmt.Sprintf("%d / %d / %d", t.ok, t.illegal, t.unknown))
	row("stale writes attempted / rejected / accepted", fmt.Sprintf("%d / %d / %d", t.staleAttempted, t.staleRejected, t.staleAccepted))
	row("double grants (per name, per slot, a writer beside anyone)", t.doubleGrants)
	row("token regressions", t.tokenRegressions)
	row("semaphore holders outside the slots", t.overLimit)
	row("multi-lock names not created at the set's token", t.partialSets)
	row("holders active sooner than the lock-delay after an unclean end", fmt.Sprintf("%d of %d", t.shortDelays, t.uncleanEnds))
	row("releases that deleted another holder's key", t.badReleases)
	row("keys deleted before their holder's deadline", t.earlyDeletes)
	row("runs with unequal HashKV", t.hashMismatches)
	row("minimum lead time (server delete - client loss)", t.minLead.Round(time.Millisecond))
	row("longest time a dead holder's lock stayed stuck", t.maxStuck.Round(time.Millisecond))
	row("negative controls detected", fmt.Sprintf("%d/%d", t.controlsDetected, t.controlRuns))
	return tab.String()
}
