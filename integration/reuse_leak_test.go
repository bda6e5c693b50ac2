package integration

import (
	"context"
	"fmt"
	"runtime/pprof"
	"strings"
	"time"
)

// runLabel is the pprof label that marks a reuse run's goroutines: a
// goroutine inherits its creator's labels, so every goroutine a run starts,
// and every one those start, carries the run's prefix, and runs in
// parallel tell their own goroutines from the others'.
const runLabel = "reuse-run"

// labelRun marks the calling goroutine, and those it starts from now on,
// as run's; the returned func removes the mark.
func labelRun(run string) (unlabel func()) {
	pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels(runLabel, run)))
	return func() { pprof.SetGoroutineLabels(context.Background()) }
}

// leakedSince counts the goroutines of the library and of this checker
// that carry run's label and still run after within.
func leakedSince(run string, within time.Duration) int {
	mine := fmt.Sprintf("%q:%q", runLabel, run)
	deadline := time.Now().Add(within)
	for {
		var leaked []string
		count := 0
		for _, g := range goroutineGroups() {
			if !strings.Contains(g.text, mine) {
				continue
			}
			if strings.Contains(g.text, "integration.(*reuseRun).observe") {
				continue // stopped after this check, once it saw the last deletions
			}
			for _, mark := range []string{"etcdlock/etcdlock/pkg/lock.", "etcdlock/etcdlock/pkg/election.", "integration.(*reuseRun)", "integration.(*lockWorker)"} {
				if strings.Contains(g.text, mark) {
					leaked = append(leaked, g.text)
					count += g.count
					break
				}
			}
		}
		if len(leaked) == 0 || time.Now().After(deadline) {
			for i, s := range leaked {
				if i < 3 {
					fmt.Printf("leaked goroutine:\n%s\n", s)
				}
			}
			return count
		}
		time.Sleep(50 * time.Millisecond)
	}
}
