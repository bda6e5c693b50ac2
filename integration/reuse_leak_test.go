package integration

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// goroutineIDs returns the IDs of the running goroutines.
func goroutineIDs() map[int]bool {
	ids := map[int]bool{}
	for _, g := range goroutineStacks() {
		ids[g.id] = true
	}
	return ids
}

type goroutineStack struct {
	id    int
	stack string
}

func goroutineStacks() []goroutineStack {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []goroutineStack
	for _, s := range strings.Split(string(buf), "\n\n") {
		f := strings.Fields(s)
		if len(f) < 2 || f[0] != "goroutine" {
			continue
		}
		id, err := strconv.Atoi(f[1])
		if err == nil {
			out = append(out, goroutineStack{id, s})
		}
	}
	return out
}

// leakedSince counts the goroutines of the library and of this checker
// that were not running at before and still run after within.
func leakedSince(before map[int]bool, within time.Duration) int {
	deadline := time.Now().Add(within)
	for {
		var leaked []string
		for _, g := range goroutineStacks() {
			if before[g.id] {
				continue
			}
			if strings.Contains(g.stack, "integration.(*reuseRun).observe") {
				continue // stopped after this check, once it saw the last deletions
			}
			for _, mark := range []string{"etcdlock/etcdlock/pkg/lock.", "etcdlock/etcdlock/pkg/election.", "integration.(*reuseRun)", "integration.(*lockWorker)"} {
				if strings.Contains(g.stack, mark) {
					leaked = append(leaked, g.stack)
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
			return len(leaked)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
