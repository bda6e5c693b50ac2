//go:build linux

package integration

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
)

// breakShapes are the process trees TestChaosCLIBreak breaks: every
// process ignores SIGTERM (so SIGKILL ends it when --kill-grace does), and
// each script touches $D/ready once its tree is up.
var breakShapes = []struct{ name, script string }{
	{"3 leftovers", leaveBehind + `touch "$D/ready"; wait`},
	{"200 setsid sleepers", sleepers(200)},
	{"1000 setsid sleepers", sleepers(1000)},
	// The shell sleeps rather than waits: the hopper's first process
	// exits at once, and a command that exited is stopped and released
	// before the test can break it.
	{"fork-and-exit hopper", `setsid perl -e '$SIG{TERM}="IGNORE"; while (1) { exit 0 if fork }' & touch "$D/ready"; sleep 1000`},
}

func sleepers(n int) string {
	return `i=0; while [ $i -lt ` + strconv.Itoa(n) + ` ]; do setsid sh -c "trap '' TERM; exec sleep 1000" & i=$((i+1)); done; touch "$D/ready"; wait`
}

// TestChaosCLIBreak measures, over BREAK_RUNS trials per shape, how
// etcdlock break hands a name over: by default (the holder is asked, stops
// everything, releases) no process of the broken holder may be alive when
// the next holder gets the name; with --force (the key deleted at once)
// the table shows how many still were. It ends with a table: per shape
// and mode, the overlaps, the most processes alive at a handover, and the
// time from when one was last seen alive to the handover (negative: an
// overlap).
func TestChaosCLIBreak(t *testing.T) {
	runs, _ := longRuns(t, "BREAK")
	began := time.Now()
	type result struct {
		overlaps, maxAlive int
		gaps               []time.Duration
	}
	results := map[string]*result{}
	var order []string
	for _, shape := range breakShapes {
		for _, mode := range []string{"ask", "force"} {
			key := shape.name + ", " + mode
			order = append(order, key)
			res := &result{}
			results[key] = res
			for i := range runs {
				t.Run(fmt.Sprintf("%s/%s/%d", strings.ReplaceAll(shape.name, " ", "_"), mode, i), func(t *testing.T) {
					alive, gap := breakTrial(t, shape.script, mode == "force")
					res.maxAlive = max(res.maxAlive, alive)
					res.gaps = append(res.gaps, gap)
					if alive > 0 || gap < 0 {
						res.overlaps++
						if mode == "ask" {
							t.Errorf("the next holder got the name with %d processes of the broken holder alive, %v before the last died", alive, -gap)
						}
					}
				})
			}
		}
	}
	tab := newTotalsTable("break totals", runs*len(order), 0, time.Since(began))
	for _, key := range order {
		r := results[key]
		slices.Sort(r.gaps)
		if len(r.gaps) == 0 {
			continue
		}
		tab.row(key, fmt.Sprintf("%d of %d overlapped, up to %d processes alive; last seen alive → handover min %v, median %v, max %v",
			r.overlaps, len(r.gaps), r.maxAlive, r.gaps[0].Round(time.Millisecond), r.gaps[len(r.gaps)/2].Round(time.Millisecond), r.gaps[len(r.gaps)-1].Round(time.Millisecond)))
	}
	t.Log("\n" + tab.String())
}

// breakTrial holds job with script, breaks it (with --force if force)
// while a second holder waits, and returns how many of the first
// holder's processes were alive when the second got the name, and the
// time from when one was last seen alive to then (negative: one was seen
// alive after it).
func breakTrial(t *testing.T, script string, force bool) (alive int, gap time.Duration) {
	mark := fmt.Sprintf("ETCDLOCK_TEST_MARK=%d", time.Now().UnixNano())
	ep := shared.Endpoints()[0]
	dir := t.TempDir()
	// Exported by the command, so that etcdlock and its guardian do not
	// have it.
	holder := cliCommand(t, ep, []string{"D=" + dir}, "run", "job", "--kill-grace", "300ms", "--shell", "--", "export "+mark+"; "+script)
	holder.WaitDelay = 5 * time.Second
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	etcdtest.Eventually(t, time.Minute, func() bool {
		_, err := os.Stat(filepath.Join(dir, "ready"))
		return err == nil
	}, "the holder's processes did not start")
	g := &guarded{cmd: holder, stderr: &lockedBuffer{}, dir: dir}
	next := nextHolder(t, g)
	// When a process was last seen alive: the start of the last scan, of
	// a poller scanning every few milliseconds, that found one. A scan
	// that found none may have missed a hopper (it forks between the
	// listing of /proc and its reads), so the poller ends only after
	// three in a row.
	var lastAlive atomic.Int64
	stop := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for zeros := 0; zeros < 3; {
			now := time.Now()
			if marked(mark) > 0 {
				lastAlive.Store(now.UnixNano())
				zeros = 0
			} else {
				zeros++
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	args := []string{"break", "job", "--token", tokenOf(t, ep)}
	if force {
		args = append(args, "--force")
	}
	if r := cli(t, ep, nil, args...); r.code != 0 {
		t.Fatalf("break: exit %d, stderr %q", r.code, r.stderr)
	}
	h := <-next
	if h.err != nil {
		t.Fatal(h.err)
	}
	alive = max(marked(mark), marked(mark))
	select {
	case <-polled:
	case <-time.After(time.Minute):
		t.Fatal("the broken holder's processes did not die")
	}
	close(stop)
	return alive, h.at.Sub(time.Unix(0, lastAlive.Load()))
}

// marked counts the live processes whose environment holds mark (the
// variable every process of a trial's command inherits).
func marked(mark string) int {
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || isZombie(pid) {
			continue
		}
		b, _ := os.ReadFile("/proc/" + e.Name() + "/environ")
		if bytes.Contains(b, []byte(mark+"\x00")) {
			n++
		}
	}
	return n
}
