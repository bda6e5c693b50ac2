package integration

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"
)

// TestReuseChecker is the session-reuse checker's short mode, run by
// `make test`: fixed seeds of about 15 s each, then the negative
// controls, one after another, beside the package's other parallel tests;
// with -short (CI's make compat, once per etcd release) the first seed
// only: the controls test the checker, which make test and the full make
// compat do.
// `make chaos` runs TestReuseLong with REUSE_RUNS and REUSE_SEED.
// REUSE_REPORT_ONLY=1 reports violations without failing, for measuring a
// library that has them.
func TestReuseChecker(t *testing.T) {
	t.Parallel()
	seeds := []uint64{1, 2, 3, 4}
	if testing.Short() {
		seeds = seeds[:1]
	}
	for _, seed := range seeds {
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
			r := runReuse(t, reuseRunConfig(seed, 13*time.Second))
			t.Log(r)
			if r.violations() != 0 {
				reuseFail(t, "violations in %v\nreplay: go test -race -count=1 -run '^TestReuseChecker$/^seed=%d$' ./integration", r, seed)
			}
		})
	}
	// Each negative control breaks one guarantee on purpose; the invariant
	// built for it must catch it, or the checker proves nothing. `make
	// chaos` (TestReuseLong) requires every control run to be caught.
	if testing.Short() {
		return
	}
	for _, control := range reuseControls {
		t.Run("control="+control, func(t *testing.T) {
			// A run whose hazard did not come (a random workload may not
			// set it up, a loaded machine makes few grants in a run), or
			// came only in a form the invariant excuses (on a starved
			// machine, an operator's delete can precede it), is followed
			// by one of the next seed: three runs, and more until the runs
			// have made reuseControlGrants grants — a bound in work, not
			// in time, which a loaded machine stretches.
			var r reuseResult
			grants := 0
			for seed := uint64(11); seed < 14 || grants < reuseControlGrants; seed++ {
				if seed == 11+reuseControlRuns {
					break
				}
				cfg := reuseRunConfig(seed, 6*time.Second)
				cfg.control, cfg.names = control, controlNames(control)
				r = runReuse(t, cfg)
				t.Log(r)
				if r.controlled && r.caught() {
					return
				}
				grants += r.grants
				t.Logf("seed %d: control %q not caught (hazard met: %v)", seed, control, r.controlled)
			}
			reuseFail(t, "negative control %q went unnoticed in %d grants (hazard met in the last run: %v): %v", control, grants, r.controlled, r)
		})
	}
}

// reuseControlGrants bounds a negative control's runs in grants;
// reuseControlRuns stops a machine so loaded that runs make none.
const (
	reuseControlGrants = 60
	reuseControlRuns   = 30
)

// TestReuseLong is the checker's part of `make chaos`: REUSE_RUNS runs of
// REUSE_DURATION (default 20s) from REUSE_SEED; every tenth run is a
// negative control (cycling through them). It ends with a totals table.
func TestReuseLong(t *testing.T) {
	runs, seed := longRuns(t, "REUSE")
	d, err := time.ParseDuration(os.Getenv("REUSE_DURATION"))
	if err != nil || d <= 0 {
		d = 20 * time.Second
	}
	fmt.Printf("REUSE_SEED=%d REUSE_RUNS=%d REUSE_DURATION=%v\n", seed, runs, d)
	tot := reuseTotals{counters: map[string]int{}, first: map[string]string{}, stats: map[string]int{}, sigRuns: map[string]int{}}
	start := time.Now()
	for i := range runs {
		cfg := reuseRunConfig(seed+uint64(i), d)
		if i%10 == 9 {
			cfg.control = reuseControls[(i/10)%len(reuseControls)]
			cfg.names = controlNames(cfg.control)
		}
		r := runReuse(t, cfg)
		fmt.Printf("run %d/%d %v\n", i+1, runs, r)
		tot.add(r)
		replay := fmt.Sprintf("REUSE_SEED=%d REUSE_RUNS=1 REUSE_DURATION=%v go test -count=1 -run '^TestReuseLong$' -v ./integration", r.seed, d)
		if r.control == "" && r.violations() > 0 {
			reuseFail(t, "run %d (seed %d): violations; replay with %s", i+1, r.seed, replay)
		}
		if r.control != "" && (!r.controlled || !r.caught()) {
			reuseFail(t, "run %d: negative control %q went unnoticed", i+1, r.control)
		}
	}
	fmt.Print(tot.table(time.Since(start)))
}

// reuseRunConfig is a run's configuration: plain names, also taken in
// sets, lock-delay names, a semaphore and a read-write lock (see kindOf).
func reuseRunConfig(seed uint64, d time.Duration) reuseConfig {
	return reuseConfig{seed: seed, duration: d, workers: 4, electors: 3, names: []string{"a", "b", "c", "d1", "d2", "s", "r"}, ttl: 3 * time.Second,
		lockDelay: reuseLockDelay}
}

// reuseLockDelay is the lock-delay of the "d" names: etcd times it with a
// lease of whole seconds, at least 2 s, so that a contender waits at least
// 500 ms more than the checker requires — room for the observer's watch
// to see a deletion late.
const reuseLockDelay = 1500 * time.Millisecond

// controlNames are the names of a control's run: few, so that its hazard
// comes soon.
func controlNames(control string) []string {
	switch control {
	case reuseSkipDelay:
		return []string{"d1", "d2"}
	case reuseOverLimit:
		return []string{"s", "s-shadow"}
	case reuseReaderAsWriter:
		return []string{"r", "a"}
	case reusePartialSet:
		// More names than its sets take, so that others hold one.
		return []string{"a", "b", "c", "e", "f"}
	}
	return []string{"a", "b", "c"}
}

// reuseFail fails t, or only logs when REUSE_REPORT_ONLY is set.
func reuseFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("REUSE_REPORT_ONLY") != "" {
		t.Logf("REPORT ONLY: "+format, args...)
		return
	}
	t.Errorf(format, args...)
}

type reuseTotals struct {
	runs, controlRuns, controlsCaught int
	grants, deletions                 int
	counters                          map[string]int
	first                             map[string]string // seed and time of the first finding
	sigRuns                           map[string]int    // runs in which each signature was found
	stats                             map[string]int
	maxNotice                         time.Duration
	uncleanEnds, delayed              int
	minDelay                          time.Duration
	followedTerms                     int
}

func (t *reuseTotals) add(r reuseResult) {
	t.runs++
	if r.control != "" {
		t.controlRuns++
		if r.controlled && r.caught() {
			t.controlsCaught++
		}
		return // a control's violations are the point, not findings
	}
	t.grants += r.grants
	t.deletions += r.deletions
	t.maxNotice = max(t.maxNotice, r.maxNotice)
	t.uncleanEnds += r.uncleanEnds
	t.followedTerms += r.followedTerms
	if r.delayed > 0 && (t.delayed == 0 || r.minDelay < t.minDelay) {
		t.minDelay = r.minDelay
	}
	t.delayed += r.delayed
	for k, v := range r.counters {
		t.counters[k] += v
		if _, ok := t.first[k]; !ok && v > 0 {
			t.first[k] = fmt.Sprintf(" (first: seed %d at %v)", r.seed, r.first[k].Round(time.Millisecond))
		}
	}
	for k, v := range r.stats {
		t.stats[k] += v
	}
	for sig := range r.signatures {
		t.sigRuns[sig]++
	}
}

func (t *reuseTotals) table(took time.Duration) string {
	tab := newTotalsTable("session-reuse checker totals", t.runs, t.controlRuns, took)
	row := tab.row
	row("grants checked / deletions attributed", fmt.Sprintf("%d / %d", t.grants, t.deletions))
	tab.counts("", t.stats)
	for _, inv := range reuseInvariants {
		row(fmt.Sprintf("violations of %d: %s", reuseInvariantNumber[inv], inv), fmt.Sprint(t.counters[inv])+t.first[inv])
	}
	tab.counts("runs that found ", t.sigRuns)
	row("slowest notice of a deleted held key", t.maxNotice.Round(time.Millisecond))
	row("unclean ends of lock-delay names / next holders checked", fmt.Sprintf("%d / %d", t.uncleanEnds, t.delayed))
	if t.delayed > 0 {
		row("shortest wait after an unclean end (required)", fmt.Sprintf("%v (%v)", t.minDelay.Round(time.Millisecond), reuseLockDelay))
	}
	row("election terms followed by another, checked against their tenure keys", t.followedTerms)
	row("negative controls caught", fmt.Sprintf("%d/%d", t.controlsCaught, t.controlRuns))
	return tab.String()
}
