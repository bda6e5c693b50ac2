//go:build linux

// Command compat is `make compat`: the tests that lean on etcd's server
// behaviour, run against every etcd release etcdlock supports, each a
// 3-member cluster of separate processes on free loopback ports, one
// release after another (-jobs: more at once, each on its own cluster).
// It ends with a table per release: tests passed,
// skipped (with each reason) and failed, and the time taken.
//
//	go run ./hack/compat [-short] [-servers 3.4,3.5] [-jobs 2] [-v]
//	go run ./hack/compat -list
//
// The servers (the table in servers.go): 3.4 from Debian's etcd-server
// package, unpacked into the user's cache directory; 3.5 and 3.6 built
// from go.etcd.io/etcd/server/v3 in the modules hack/etcdserver/v3.5 and
// hack/etcdserver/v3.6, where it is a tool, into the go command's build
// cache; 3.7, this module's own etcd, embedded in this program (its member
// mode). A second run downloads and builds no server.
//
// The tests (the table in suite.go) find the cluster through
// etcdtest.EndpointsEnv; those that need an etcd of their own skip
// themselves. A test that fails runs once more, alone (the machine is
// shared and its load comes and goes): one that passes then is listed
// with its first failure. -short is CI's subset.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "member" {
		if err := memberMain(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "compat member:", err)
			os.Exit(1)
		}
		return
	}
	short := flag.Bool("short", false, "run CI's subset of the tests (each group's short pattern; the reuse checker with one seed)")
	only := flag.String("servers", "", "comma-separated releases to test (default: all)")
	list := flag.Bool("list", false, "print the releases and the tests, and exit")
	verbose := flag.Bool("v", false, "print the tests' output as they run")
	parallel := flag.Int("parallel", 4, "tests run at once in each test binary (go test -parallel)")
	jobs := flag.Int("jobs", 1, "releases tested at once, each on a cluster of its own")
	flag.Parse()
	if flag.NArg() != 0 || *jobs < 1 {
		flag.Usage()
		os.Exit(64)
	}
	if *list {
		printList(os.Stdout, *short)
		return
	}
	srvs, err := selectServers(*only)
	if err != nil {
		fmt.Fprintln(os.Stderr, "compat:", err)
		os.Exit(64)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var out io.Writer
	if *verbose {
		out = os.Stdout
	}
	ok, err := run(ctx, srvs, *short, *jobs, *parallel, out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "compat:", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

// selectServers returns the servers named in only (all if empty).
func selectServers(only string) ([]server, error) {
	if only == "" {
		return servers, nil
	}
	var sel []server
	for _, v := range strings.Split(only, ",") {
		i := slices.IndexFunc(servers, func(s server) bool { return s.version == v })
		if i < 0 {
			return nil, fmt.Errorf("no server %q (have 3.4, 3.5, 3.6, 3.7)", v)
		}
		sel = append(sel, servers[i])
	}
	return sel, nil
}

// versionResult is one release's run.
type versionResult struct {
	s       server
	version string // as the members reported it
	members int
	groups  []groupResult
	elapsed time.Duration
}

// run tests the servers, jobs at a time, each with a cluster of its own,
// and prints each one's results as it ends; ok is false if a test failed.
func run(ctx context.Context, srvs []server, short bool, jobs, parallel int, verbose io.Writer) (ok bool, err error) {
	start := time.Now()
	bins, err := os.MkdirTemp("", "etcdlock-compat-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(bins)
	gs := selectedGroups(short)
	paths := make([]string, len(srvs))
	pre := make([][]string, len(srvs))
	for i, s := range srvs {
		t0 := time.Now()
		if paths[i], pre[i], err = s.obtain(ctx); err != nil {
			return false, fmt.Errorf("etcd %s: %w", s.version, err)
		}
		fmt.Printf("etcd %s: %s (%s), ready in %v\n", s.version, paths[i], s.from, time.Since(t0).Round(100*time.Millisecond))
	}
	t0 := time.Now()
	if err := buildTests(ctx, gs, bins); err != nil {
		return false, err
	}
	fmt.Printf("test binaries built in %v\n", time.Since(t0).Round(100*time.Millisecond))
	ok = true
	results := make([]versionResult, len(srvs))
	errs := make([]error, len(srvs))
	var (
		mu  sync.Mutex // the report
		wg  sync.WaitGroup
		sem = make(chan struct{}, jobs)
	)
	for i, s := range srvs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			vr, err := runServer(ctx, s, paths[i], pre[i], gs, short, bins, parallel, verbose)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs[i] = fmt.Errorf("etcd %s: %w", s.version, err)
				return
			}
			results[i] = vr
			ok = printServer(os.Stdout, vr) && ok
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return false, err
	}
	printSummary(os.Stdout, results, short, time.Since(start))
	return ok, nil
}

// selectedGroups are the groups with tests to run in mode short.
func selectedGroups(short bool) []group {
	var gs []group
	for _, g := range groups {
		if g.pattern(short) != "" {
			gs = append(gs, g)
		}
	}
	return gs
}

// runServer starts a cluster of s and runs the groups against it: two
// test binaries at once (as go test runs packages on two cores), then
// those that must run alone, one after another.
func runServer(ctx context.Context, s server, path string, pre []string, gs []group, short bool, bins string, parallel int, verbose io.Writer) (versionResult, error) {
	start := time.Now()
	c, err := startCluster(ctx, s, path, pre, 3, os.TempDir())
	if err != nil {
		return versionResult{}, err
	}
	defer c.stop()
	fmt.Printf("etcd %s: 3 members serving at %s\n", c.version, strings.Join(c.endpoints, ","))
	if !strings.HasPrefix(c.version, s.version+".") {
		return versionResult{}, fmt.Errorf("the members report version %s", c.version)
	}
	vr := versionResult{s: s, version: c.version, members: len(c.endpoints), groups: make([]groupResult, len(gs))}
	sem := make(chan struct{}, 2)
	done := make(chan struct{})
	pending := 0
	for i, g := range gs {
		if g.alone {
			continue
		}
		pending++
		go func() {
			sem <- struct{}{}
			vr.groups[i] = runGroup(ctx, g, g.pattern(short), short, bins, c.endpoints, parallel, verbose)
			<-sem
			done <- struct{}{}
		}()
	}
	for range pending {
		<-done
	}
	for i, g := range gs {
		if g.alone {
			vr.groups[i] = runGroup(ctx, g, g.pattern(short), short, bins, c.endpoints, parallel, verbose)
		}
	}
	for i := range vr.groups {
		vr.groups[i] = retryFailed(ctx, vr.groups[i], short, bins, c.endpoints, verbose)
	}
	if err := c.exitedEarly(); err != nil {
		return vr, err
	}
	vr.elapsed = time.Since(start)
	return vr, ctx.Err()
}

// printServer prints one release's results per group, the skipped tests
// by reason, and every failure's output; it returns false on a failure.
func printServer(w io.Writer, vr versionResult) bool {
	ok := true
	fmt.Fprintf(w, "\n== etcd %s, %d members (%s)\n", vr.version, vr.members, vr.s.from)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, r := range vr.groups {
		status := "ok"
		if r.count("fail") > 0 || r.err != nil {
			status, ok = "FAIL", false
		}
		alone := ""
		if r.g.alone {
			alone = " (alone)"
		}
		fmt.Fprintf(tw, "%s\t%s%s\t%d passed\t%d skipped\t%d failed\t%v\n", status, r.g.importPath(), alone,
			r.count("pass"), r.count("skip"), r.count("fail"), r.elapsed.Round(100*time.Millisecond))
	}
	tw.Flush()
	reasons := map[string][]string{}
	for _, r := range vr.groups {
		for _, t := range r.tests {
			if t.action == "skip" {
				reasons[t.reason] = append(reasons[t.reason], r.g.importPath()+"."+t.name)
			}
		}
	}
	for _, reason := range sortedKeys(reasons) {
		fmt.Fprintf(w, "skipped (%d): %s\n", len(reasons[reason]), reason)
		for _, name := range reasons[reason] {
			fmt.Fprintf(w, "    %s\n", name)
		}
	}
	for _, r := range vr.groups {
		for _, t := range r.retried() {
			fmt.Fprintf(w, "passed on a second try: %s.%s, after:\n", r.g.importPath(), t.name)
			for _, line := range t.firstFailure {
				fmt.Fprintf(w, "    %s\n", line)
			}
		}
	}
	for _, r := range vr.groups {
		for _, t := range r.tests {
			if t.action == "fail" {
				fmt.Fprintf(w, "--- FAIL: %s %s (etcd %s)\n%s\n", r.g.importPath(), t.name, vr.version, strings.Join(t.output, "\n"))
			}
		}
		if r.err != nil {
			fmt.Fprintf(w, "--- FAIL: %s (etcd %s): %v\n%s\n", r.g.importPath(), vr.version, r.err, strings.Join(r.tail, "\n"))
		}
	}
	return ok
}

// printSummary prints one line per release, then the totals.
func printSummary(w io.Writer, results []versionResult, short bool, took time.Duration) {
	mode := "full"
	if short {
		mode = "short"
	}
	fmt.Fprintf(w, "\ncompat (%s) in %v:\n", mode, took.Round(time.Second))
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "etcd\tserver\tpassed\t(on a second try)\tskipped\tfailed\ttime")
	var total [3]int // passed, failed, skipped
	for _, vr := range results {
		var pass, retried, skip, fail int
		for _, r := range vr.groups {
			pass, skip, fail = pass+r.count("pass"), skip+r.count("skip"), fail+r.count("fail")
			retried += len(r.retried())
			if r.err != nil {
				fail++
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%v\n", vr.version, vr.s.from, pass, retried, skip, fail, vr.elapsed.Round(time.Second))
		total[0], total[1], total[2] = total[0]+pass, total[1]+fail, total[2]+skip
	}
	tw.Flush()
	fmt.Fprintf(w, "compat: %d passed, %d failed, %d skipped\n", total[0], total[1], total[2])
}

// printList prints the releases and each group's tests in mode short.
func printList(w io.Writer, short bool) {
	for _, s := range servers {
		fmt.Fprintf(w, "etcd %s: %s\n", s.version, s.from)
	}
	for _, g := range selectedGroups(short) {
		alone := ""
		if g.alone {
			alone = " (alone, one at a time)"
		}
		fmt.Fprintf(w, "%s%s: -run '%s'", g.importPath(), alone, g.pattern(short))
		if g.skip != "" {
			fmt.Fprintf(w, " -skip '%s'", g.skip)
		}
		fmt.Fprintln(w)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
