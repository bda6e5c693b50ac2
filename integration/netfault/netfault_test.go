package netfault

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// harness is one network with its cluster and the programs it runs.
type harness struct {
	t       *testing.T
	net     *network
	cluster *cluster
	bins    *binaries
	prefix  string
}

// newHarness builds the programs, makes the network and starts the
// cluster; all of it is removed when t ends.
func newHarness(t *testing.T, ctx context.Context) *harness {
	t.Helper()
	bins, err := build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	n := newNetwork(t, append(append([]string(nil), memberNames...), clientNames...)...)
	var members []*node
	for _, m := range memberNames {
		members = append(members, n.node(m))
	}
	c := startCluster(t, ctx, bins, t.TempDir(), members...)
	return &harness{t: t, net: n, cluster: c, bins: bins, prefix: "/netfault/"}
}

// trialResult is what one trial saw.
type trialResult struct {
	verdict
	codes map[int]int // etcdlock run exit codes
	steps []probeStep
}

// trial runs two clients contending for one name, injects f into a
// leader, follower or client chosen before it, for 1.5–3 TTLs, heals it,
// lets the clients go on for a TTL and 2 s more, then checks every
// holding of the name.
func (h *harness) trial(ctx context.Context, f fault, name string, rng *rand.Rand) (trialResult, error) {
	res := trialResult{codes: map[int]int{}}
	leader := leaderOf(ctx, h.bins, h.net.node("p0"), h.cluster, time.Minute)
	if leader == "" {
		return res, fmt.Errorf("%s: the cluster has no leader every member answers for", name)
	}
	tg := target{seed: rng.Uint64()}
	var followers []int
	for i, nd := range h.cluster.nodes {
		if nd.name == leader {
			tg.leader = i
		} else {
			followers = append(followers, i)
		}
	}
	tg.follower = followers[rng.IntN(len(followers))]
	dir := h.t.TempDir()
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var recs []runRecord
	for i, c := range []string{"c0", "c1"} {
		wrng := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if f.control && i == 1 && !holderStarted(wctx, dir, "c0") {
				return
			}
			r := h.worker(wctx, c, name, dir, wrng, f.control && i == 0)
			mu.Lock()
			recs = append(recs, r...)
			mu.Unlock()
		}()
	}
	defer func() { stop(); wg.Wait() }() // on every return: the workers end first
	// The pauses below are the fault's schedule: its start and length.
	pause(ctx, time.Second+time.Duration(rng.IntN(1000))*time.Millisecond)
	tg.client = holderNow(dir, rng)
	d := ttl*3/2 + time.Duration(rng.Int64N(int64(ttl*3/2)))
	var heal func() error
	if f.inject != nil {
		var err error
		if heal, err = f.inject(ctx, h, tg); err != nil {
			return res, fmt.Errorf("%s: inject: %w", name, err)
		}
	}
	type probed struct {
		steps []probeStep
		err   error
	}
	pr := make(chan probed, 1)
	if f.member {
		go func() {
			s, err := h.probe(ctx, d)
			pr <- probed{s, err}
		}()
	} else {
		pr <- probed{}
	}
	pause(ctx, d)
	if heal != nil {
		if err := heal(); err != nil {
			return res, fmt.Errorf("%s: heal: %w", name, err)
		}
	}
	pause(ctx, ttl+2*time.Second)
	if ctx.Err() != nil {
		return res, fmt.Errorf("%s: %w", name, ctx.Err())
	}
	stop()
	wg.Wait()
	p := <-pr
	if p.err != nil {
		return res, p.err
	}
	res.steps = p.steps
	var hs []holding
	for _, r := range recs {
		res.codes[r.code]++
		hd, ok, err := readHolding(r.client, r.file)
		if err != nil {
			return res, err
		}
		if ok {
			hs = append(hs, hd)
		}
	}
	res.verdict = check(hs)
	return res, nil
}

// pause waits d, or until ctx ends (an interrupt ends the trial).
func pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// holderStarted waits until a command of client's holds the lock, for
// at most two TTLs: the control's client must hold first, or the other
// client, which waits its turn, may never let it in.
func holderStarted(ctx context.Context, dir, client string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*ttl)
	defer cancel()
	for {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if strings.Contains(e.Name(), "-"+client+"-") && !strings.HasSuffix(e.Name(), ".err") {
				return true
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// holderNow is the client whose command runs under the lock now, read
// from the holders' records in dir, or a client drawn at random if none
// does: a cut client is the holder when there is one.
func holderNow(dir string, rng *rand.Rand) string {
	entries, _ := os.ReadDir(dir)
	now := time.Now()
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".err") {
			continue
		}
		client := "c0"
		if strings.Contains(e.Name(), "-c1-") {
			client = "c1"
		}
		hd, ok, err := readHolding(client, filepath.Join(dir, e.Name()))
		if err == nil && ok && !hd.ended && now.Sub(hd.last) < 100*time.Millisecond {
			return client
		}
	}
	return []string{"c0", "c1"}[rng.IntN(2)]
}

// settings reads NETFAULT_TRIALS (per fault, default 1), NETFAULT_SEED
// (default: drawn from the time) and NETFAULT_FAULTS (comma-separated
// names; default every fault).
func settings(t *testing.T) (trials int, seed uint64, fs []fault) {
	trials, _ = strconv.Atoi(os.Getenv("NETFAULT_TRIALS"))
	if trials <= 0 {
		trials = 1
	}
	seed, _ = strconv.ParseUint(os.Getenv("NETFAULT_SEED"), 10, 64)
	if seed == 0 {
		seed = uint64(time.Now().UnixNano() % 1_000_000)
	}
	want := strings.Split(os.Getenv("NETFAULT_FAULTS"), ",")
	for _, f := range faults() {
		if want[0] == "" || slices.Contains(want, f.name) {
			fs = append(fs, f)
		}
	}
	if len(fs) == 0 {
		var names []string
		for _, f := range faults() {
			names = append(names, f.name)
		}
		t.Fatalf("NETFAULT_FAULTS=%q names no fault; faults: %s", os.Getenv("NETFAULT_FAULTS"), strings.Join(names, ","))
	}
	return trials, seed, fs
}

// TestNetFault runs NETFAULT_TRIALS trials of every fault (NETFAULT_FAULTS)
// and prints a table per fault: trials, holders checked, overlaps, token
// regressions, the smallest and largest gap between a holder's last sign of life and
// the next one's start, run exit codes, and p50/p99 of the probe's steps
// (NewSession, uncontended Acquire, handoff, deleted-key notice) while the
// fault lasted. It fails on any overlap or regression outside the
// control, and on a control trial without one.
func TestNetFault(t *testing.T) {
	enabled(t)
	trials, seed, fs := settings(t)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	t.Logf("NETFAULT_SEED=%d NETFAULT_TRIALS=%d", seed, trials)
	start := time.Now()
	h := newHarness(t, ctx)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var sums []*summary
	for _, f := range fs {
		s := &summary{f: f, codes: map[int]int{}, steps: map[string][]probeStep{}}
		sums = append(sums, s)
		for i := range trials {
			r, err := h.trial(ctx, f, fmt.Sprintf("%s-%d", f.name, i), rng)
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			t.Logf("%s trial %d: %d holders, %d overlaps, %d token regressions, gaps %v–%v, run exits %s%s",
				f.name, i, r.holdings, len(r.overlaps), len(r.regressed), r.minGap.Round(time.Millisecond), r.maxGap.Round(time.Millisecond), codes(r.codes), stepErrors(r.steps))
			s.add(r)
		}
	}
	fmt.Print(table(sums, seed, time.Since(start)))
	for _, s := range sums {
		switch {
		case s.f.control && s.caught < s.trials:
			t.Errorf("%s: the checker caught the control in %d of %d trials", s.f.name, s.caught, s.trials)
		case !s.f.control:
			for _, o := range s.overlaps {
				t.Errorf("%s: overlap: %s", s.f.name, o)
			}
			for _, r := range s.regressed {
				t.Errorf("%s: %s", s.f.name, r)
			}
		}
	}
}
