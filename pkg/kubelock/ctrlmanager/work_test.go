package ctrlmanager_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/etcdlock/etcdlock/pkg/kubelock/internal/kubetest"
)

// workLog records the runs of the managers' leader-only Runnable, each
// from its first to its last moment of work, on this process's clock.
type workLog struct {
	mu     sync.Mutex
	runs   []*workRun
	change chan struct{} // a run started or ended
}

type workRun struct {
	who         string
	token       int64 // the term's fencing token, 0 if unknown
	first, last time.Time
	done        bool
}

func newWorkLog() *workLog { return &workLog{change: make(chan struct{}, 1)} }

func (w *workLog) notify() {
	select {
	case w.change <- struct{}{}:
	default:
	}
}

// runnable is a plain leader-only Runnable that works until its context
// ends, as a reconciler does: every moment of work is stamped before it
// checks that its context is live, so a stamp is never later than the
// context's end.
func (w *workLog) runnable(who string, token func() int64) manager.RunnableFunc {
	return func(ctx context.Context) error {
		var r *workRun
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			now := time.Now()
			if ctx.Err() != nil {
				break
			}
			w.mu.Lock()
			if r == nil {
				r = &workRun{who: who, first: now}
				if token != nil {
					r.token = token()
				}
				w.runs = append(w.runs, r)
				w.notify()
			}
			r.last = now
			w.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
		if r != nil {
			w.mu.Lock()
			r.done = true
			w.mu.Unlock()
			w.notify()
		}
		return nil
	}
}

// started returns how many runs have started, and who works now.
func (w *workLog) started() (n int, current string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := len(w.runs) - 1; i >= 0 && current == ""; i-- {
		if !w.runs[i].done {
			current = w.runs[i].who
		}
	}
	return len(w.runs), current
}

// current returns the run that works now (the latest started), if any.
func (w *workLog) current() *workRun {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := len(w.runs) - 1; i >= 0; i-- {
		if !w.runs[i].done {
			return w.runs[i]
		}
	}
	return nil
}

// waitFor waits until cond holds, or fails t after within.
func (w *workLog) waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	kubetest.WaitFor(t, w.change, within, what, cond)
}

// overlaps returns, for every run that started while an earlier one
// still worked, by how much they overlapped.
func (w *workLog) overlaps() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	runs := append([]*workRun(nil), w.runs...)
	sort.Slice(runs, func(i, j int) bool { return runs[i].first.Before(runs[j].first) })
	var bad []string
	var latest *workRun // of the runs so far, the one that worked last
	for _, r := range runs {
		if latest != nil && !latest.last.Before(r.first) {
			bad = append(bad, fmt.Sprintf("%s worked %v after %s started", latest.who,
				latest.last.Sub(r.first).Round(time.Millisecond), r.who))
		}
		if latest == nil || r.last.After(latest.last) {
			latest = r
		}
	}
	return bad
}

// tokensRising returns, for every run whose token is not above the token
// of the run that started before it, what went wrong; runs without a
// token are left out.
func (w *workLog) tokensRising() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var bad []string
	var prev *workRun
	for _, r := range w.runs {
		if r.token == 0 {
			continue
		}
		if prev != nil && r.token <= prev.token {
			bad = append(bad, fmt.Sprintf("%s's token %d after %s's %d", r.who, r.token, prev.who, prev.token))
		}
		prev = r
	}
	return bad
}

// mustOverlap is a negative control's verdict: it fails t unless the
// checker caught an overlap of the runs in log under setup, and logs them.
func mustOverlap(t testing.TB, log *workLog, setup string) {
	t.Helper()
	overlaps := log.overlaps()
	if len(overlaps) == 0 {
		t.Errorf("no overlap with %s: the check cannot fail", setup)
	}
	for _, o := range overlaps {
		t.Logf("%s: %s", setup, o)
	}
}
