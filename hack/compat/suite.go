//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
)

// group is one package's tests that make compat runs against every
// server: the table the README's support matrix lists.
type group struct {
	module, pkg string // the module's directory and the package, from it
	run, skip   string // -test.run and -test.skip patterns
	short       string // -test.run in -short mode (CI); "" runs none
	// alone runs the tests one at a time with nothing else on the
	// cluster (etcdtest.AloneEnv): they compact its history.
	alone bool
}

// The tests that compact the history: they run alone.
const (
	compacting     = `^(TestHolderNoticesDeleteMissedWhileDisconnected|TestWaiterTakesAReleaseMissedAcrossCompaction)$`
	kubeCompacting = `^TestCompactionWhileDisconnectedEndsTheTerm$`
)

var groups = []group{
	// Every kind's acquire, wait, release, loss and lock-delay paths
	// and the watch stream (and, below, the script mode, pkg/detached); the tests that need an
	// etcd of their own skip themselves (etcdtest.Cluster).
	{module: ".", pkg: "./pkg/lock", run: `^Test`, skip: compacting,
		short: `^(TestAcquireReleaseLifecycle|TestAcquireIsFIFO|TestHolderLosesLockWhenKeyDeleted|TestRevokedLeaseLosesSessionAndLocks|` +
			`TestSemaphoreAdmitsLimitInOrder|TestSemaphoreSlotDeletedLosesHolder|TestReadersShareWritersQueue|` +
			`TestAcquireAllQueuesInEveryName|TestAcquireAllLosesWhenAnyKeyGoes|TestAcquireAllRequestSizeIsCheckedBeforeSending|` +
			`TestLockDelayAfterAnUncleanEnd|TestDeadlineFromSendTimeAndLossWithoutReply|TestGrantedTTLIsUsed|TestRenewalKeepsSessionAlive|` +
			`TestHeldLocksShareOneWatchStream|TestWaiterRetriesAReadCutOffInFlight|TestInteroperatesWithConcurrencyMutex)$`},
	{module: ".", pkg: "./pkg/lock", run: compacting, short: compacting, alone: true},
	{module: ".", pkg: "./pkg/detached", run: `^Test`, short: `^(TestDetachedAcquireRenewRelease|TestDetachedRenewAfterExpiryFails)$`},
	{module: ".", pkg: "./pkg/lock/lockmetrics", run: `^Test`, short: ""},
	// Follow and Break, as an operator's view of the holders.
	{module: ".", pkg: "./pkg/holders", run: `^Test`, short: `^(TestFollowReportsEachChangeOfHolder|TestFollowSemaphore|TestBreakAsksTheHolderFirst)$`},
	{module: ".", pkg: "./pkg/election", run: `^Test`, short: `^Test`},
	// A kubelock term, with client-go's elector and through faults.
	{module: "pkg/kubelock", pkg: ".", run: `^Test`, skip: kubeCompacting,
		short: `^(TestGetMissingThenCreateOnce|TestReleaseEndsTermThenDeletesRecord|TestTermEndsBeforeEtcdExpiresTheLease|TestLeaderElectorOneLeaderThroughFaults)$`},
	{module: "pkg/kubelock", pkg: ".", run: kubeCompacting, short: kubeCompacting, alone: true},
	{module: ".", pkg: "./fencing/etcdfence", run: `^Test`, short: `^Test`},
	{module: ".", pkg: "./fencing", run: `^TestRaceOfGuards$/^etcdfence$`, short: `^TestRaceOfGuards$/^etcdfence$`},
	// The seed's scenarios, the CLI's main commands and kinds, and the
	// session-reuse checker (in -short mode one seed, no control). Not
	// TestAcquireAllCannotDeadlock: it counts a set that waits past 4 s
	// as a deadlock, a bound for make test's single embedded member that
	// queues on three member processes pass without one (pkg/lock's
	// AcquireAll tests run here).
	{module: ".", pkg: "./integration",
		run: `^(TestScenario.*|TestCLICommandMainPaths|TestCLIScriptCommands|TestCLIExitCodes|TestCLISemaphore|TestCLISharedRun|` +
			`TestCLIRunSeveralNames|TestCLILockDelay|TestReuseChecker)$`,
		short: `^(TestScenario.*|TestCLICommandMainPaths|TestCLIScriptCommands|TestReuseChecker)$`},
}

// pattern is g's -test.run in mode short.
func (g group) pattern(short bool) string {
	if short {
		return g.short
	}
	return g.run
}

// binary is the file of g's test binary in dir.
func (g group) binary(dir string) string {
	name := strings.NewReplacer("/", "_", ".", "_").Replace(filepath.Join(g.module, g.pkg))
	return filepath.Join(dir, strings.Trim(name, "_")+".test")
}

// importPath is g's package path, for the report.
func (g group) importPath() string {
	p := filepath.Join(g.module, g.pkg)
	if p == "." {
		return "root"
	}
	return p
}

// buildTests compiles each group's test binary into dir, once per package,
// with the race detector as make test does (whose build cache it reuses).
func buildTests(ctx context.Context, gs []group, dir string) error {
	done := map[string]bool{}
	for _, g := range gs {
		bin := g.binary(dir)
		if done[bin] {
			continue
		}
		done[bin] = true
		cmd := exec.CommandContext(ctx, "go", "test", "-c", "-race", "-o", bin, g.pkg)
		cmd.Dir = g.module
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go test -c %s: %v\n%s", g.importPath(), err, out)
		}
	}
	return nil
}

// testResult is how one top-level test ended.
type testResult struct {
	name    string
	action  string // pass, fail or skip
	reason  string // a skip's message
	elapsed float64
	output  []string // a failure's output, its subtests' included
	// firstFailure is the output of a test that failed, then passed when
	// run again (retryFailed): its messages, without the log lines.
	firstFailure []string
}

// retryFailed runs r's failed tests once more, alone on the cluster and
// one at a time: the machine is shared and its load comes and goes, so
// a test that fails once under load is given a second, quieter try. A
// test that passes then counts as passed, and the report lists it with
// its first failure; one that fails again keeps its first failure.
func retryFailed(ctx context.Context, r groupResult, short bool, bins string, endpoints []string, verbose io.Writer) groupResult {
	var failed []string
	for _, t := range r.tests {
		if t.action == "fail" {
			failed = append(failed, regexp.QuoteMeta(t.name))
		}
	}
	if len(failed) == 0 || r.err != nil {
		return r
	}
	again := runGroup(ctx, r.g, "^("+strings.Join(failed, "|")+")$", short, bins, endpoints, 1, verbose)
	if again.err != nil {
		return r
	}
	for i, t := range r.tests {
		j := slices.IndexFunc(again.tests, func(a testResult) bool { return a.name == t.name })
		if t.action == "fail" && j >= 0 && again.tests[j].action == "pass" {
			first := messages(t.output)
			r.tests[i] = again.tests[j]
			r.tests[i].firstFailure = first
		}
	}
	r.elapsed += again.elapsed
	return r
}

// messages are the lines of output that a test's t.Error, t.Fatal or
// t.Log wrote with their file:line, but for loggers' lines.
func messages(output []string) []string {
	var m []string
	for _, line := range output {
		if fileLine.MatchString(line) && !strings.HasPrefix(strings.TrimSpace(line), "logger.go:") {
			m = append(m, strings.TrimSpace(line))
		}
	}
	return m
}

func (r groupResult) retried() []testResult {
	var rs []testResult
	for _, t := range r.tests {
		if t.firstFailure != nil {
			rs = append(rs, t)
		}
	}
	return rs
}

// groupResult is one run of a group's tests.
type groupResult struct {
	g       group
	tests   []testResult
	err     error // the binary failed beyond its tests (TestMain, a panic, a leak)
	elapsed time.Duration
	tail    []string // the binary's last output lines, for err
}

func (r groupResult) count(action string) int {
	n := 0
	for _, t := range r.tests {
		if t.action == action {
			n++
		}
	}
	return n
}

// runGroup runs g's tests that match run against endpoints, in mode
// short, through test2json, with parallel tests at once (one with alone).
func runGroup(ctx context.Context, g group, run string, short bool, bins string, endpoints []string, parallel int, verbose io.Writer) groupResult {
	start := time.Now()
	res := groupResult{g: g}
	args := []string{"tool", "test2json", "-t", "-p", g.importPath(), g.binary(bins),
		"-test.v=test2json", "-test.run", run, "-test.timeout", "20m"}
	if g.skip != "" {
		args = append(args, "-test.skip", g.skip)
	}
	if short {
		args = append(args, "-test.short")
	}
	env := append(os.Environ(), etcdtest.EndpointsEnv+"="+strings.Join(endpoints, ","))
	if g.alone {
		parallel = 1
		env = append(env, etcdtest.AloneEnv+"=1")
	}
	args = append(args, "-test.parallel", fmt.Sprint(parallel))
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = filepath.Join(g.module, g.pkg)
	cmd.Env = env
	out, err := cmd.StdoutPipe()
	if err != nil {
		res.err = err
		return res
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		res.err = err
		return res
	}
	res.tests, res.tail = parseEvents(out, verbose)
	if err := cmd.Wait(); err != nil && res.count("fail") == 0 {
		res.err = err
	}
	res.elapsed = time.Since(start)
	return res
}

// event is one line of test2json's output.
type event struct {
	Action  string
	Test    string
	Output  string
	Elapsed float64
}

// fileLine is the "file.go:12: " that t.Skip and t.Log put before a message.
var fileLine = regexp.MustCompile(`^\s*[\w.-]+\.go:\d+: `)

// parseEvents reads test2json's events and returns each top-level test's
// result, and the output lines that belong to no test (the last 30).
func parseEvents(r io.Reader, verbose io.Writer) ([]testResult, []string) {
	byName := map[string]*testResult{}
	var order []string
	var tail []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			tail = appendTail(tail, sc.Text())
			continue
		}
		if verbose != nil && e.Action == "output" {
			io.WriteString(verbose, e.Output)
		}
		if e.Test == "" {
			if e.Action == "output" {
				tail = appendTail(tail, strings.TrimRight(e.Output, "\n"))
			}
			continue
		}
		top, _, sub := strings.Cut(e.Test, "/")
		t := byName[top]
		if t == nil {
			t = &testResult{name: top}
			byName[top] = t
			order = append(order, top)
		}
		switch e.Action {
		case "output":
			line := strings.TrimRight(e.Output, "\n")
			t.output = append(t.output, line)
			trimmed := strings.TrimSpace(line)
			if !sub && !strings.HasPrefix(trimmed, "=== ") && !strings.HasPrefix(trimmed, "--- ") && fileLine.MatchString(line) {
				t.reason = fileLine.ReplaceAllString(line, "")
			}
		case "pass", "fail", "skip":
			if !sub {
				t.action, t.elapsed = e.Action, e.Elapsed
			}
		}
	}
	var res []testResult
	for _, name := range order {
		t := byName[name]
		if t.action != "fail" {
			t.output = nil
		}
		if t.action != "skip" {
			t.reason = ""
		}
		if t.action != "" {
			res = append(res, *t)
		}
	}
	sort.SliceStable(res, func(i, j int) bool { return res[i].name < res[j].name })
	return res, tail
}

func appendTail(tail []string, line string) []string {
	tail = append(tail, line)
	if len(tail) > 30 {
		tail = tail[len(tail)-30:]
	}
	return tail
}
