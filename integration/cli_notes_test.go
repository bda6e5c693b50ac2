package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
)

// A run that waits for nobody says nothing: a reader beside a reader, a
// semaphore with a free slot, and a refusal for another kind (76) print
// no "waiting for" note.
func TestCLINoWaitingNoteWhenNothingWaits(t *testing.T) {
	t.Parallel()
	ep, dir := shared.Endpoints()[0], t.TempDir()
	startedRun(t, ep, dir, "reader", "rw", "--shared")
	startedRun(t, ep, dir, "slot", "pool", "--limit", "2")
	startedRun(t, ep, dir, "plain", "plain")
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"run", "--shared", "rw", "true"}, 0},
		{[]string{"run", "--limit", "2", "pool", "true"}, 0},
		{[]string{"run", "--limit", "2", "plain", "true"}, 76},
	} {
		r := cli(t, ep, nil, tc.args...)
		if r.code != tc.code || strings.Contains(r.stderr, "waiting for") || strings.Contains(r.stderr, "after waiting") {
			t.Errorf("%v: exit %d, stderr %q; want %d and no waiting note", tc.args, r.code, r.stderr, tc.code)
		}
	}
}

// Messages about several names quote each name, and a timeout names the
// set it waited for.
func TestCLISetMessagesNameEveryName(t *testing.T) {
	t.Parallel()
	ep, dir := shared.Endpoints()[0], t.TempDir()
	startedRun(t, ep, dir, "b", "m-b")
	r := cli(t, ep, nil, "run", "--timeout", "300ms", "m-a", "m-b", "m-c", "--", "true")
	if r.code != 124 || !strings.Contains(r.stderr, `waiting for locks "m-a", "m-b", "m-c"`) {
		t.Errorf("timed out set: exit %d, stderr %q; want 124 naming the three locks", r.code, r.stderr)
	}
	w := cliCommand(t, ep, nil, "run", "m-a", "m-b", "m-c", "--", "true")
	stderr := &lockedBuffer{}
	w.Stderr = stderr
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	etcdtest.Eventually(t, 20*time.Second, func() bool { return strings.Contains(stderr.String(), `waiting for lock "m-b"`) }, "no waiting note")
	if err := os.WriteFile(filepath.Join(dir, "b.stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := w.Wait(); err != nil {
		t.Fatalf("set: %v; stderr %q", err, stderr)
	}
	if !strings.Contains(stderr.String(), `acquired locks "m-a", "m-b", "m-c" (token`) {
		t.Errorf("stderr %q; want the acquired note with every name quoted", stderr)
	}
}

// A --try refused by a set that waits at the name's head (for another of
// its names) says the name is not held, as status does, and who waits.
func TestCLITryRefusedByAWaitingSet(t *testing.T) {
	t.Parallel()
	ep, dir := shared.Endpoints()[0], t.TempDir()
	startedRun(t, ep, dir, "eu", "t-eu")
	holdingRun(t, ep, dir, "set", "t-us", "t-eu")
	t.Cleanup(func() { _ = os.WriteFile(filepath.Join(dir, "eu.stop"), nil, 0o644) })
	waitQueued(t, testCtx(t, time.Minute), etcdtest.Client(t, ep), "t-us", 1)
	r := cli(t, ep, nil, "run", "--try", "t-us", "true")
	if r.code != 75 || strings.Contains(r.stderr, "is held by") || !strings.Contains(r.stderr, `lock "t-us" is not held, but 1 waiter queued`) ||
		!strings.Contains(r.stderr, `waits for locks "t-us", "t-eu"`) {
		t.Errorf("--try behind a waiting set: exit %d, stderr %q; want 75, not held, the set waiting", r.code, r.stderr)
	}
}

// A run waiting for a semaphore's holders, or for readers, names every
// holder, as status does, and the writer a reader queues behind; it names
// them again when the holders change, but not while a semaphore has a
// slot free (a waiter ahead is about to claim it).
func TestCLIWaitingNoteNamesEveryHolder(t *testing.T) {
	t.Parallel()
	ep, dir := shared.Endpoints()[0], t.TempDir()
	token := func(id string) string { return "(token " + strings.Fields(running(dir, id))[1] }
	var waiters []string
	waiter := func(id, name string, flags ...string) *lockedBuffer {
		stderr := &lockedBuffer{}
		startHoldingRun(t, ep, dir, id, name, stderr, flags...)
		stderr.waitFor(t, "waiting for lock", 20*time.Second)
		waiters = append(waiters, id)
		return stderr
	}
	notes := func(stderr *lockedBuffer) []string {
		var ns []string
		for line := range strings.Lines(stderr.String()) {
			if strings.Contains(line, "waiting for lock") {
				ns = append(ns, line)
			}
		}
		return ns
	}

	startedRun(t, ep, dir, "r1", "w-rw", "--shared")
	startedRun(t, ep, dir, "r2", "w-rw", "--shared")
	if n := notes(waiter("writer", "w-rw")); len(n) != 1 || !strings.Contains(n[0], "held by 2 readers: ") ||
		!strings.Contains(n[0], token("r1")) || !strings.Contains(n[0], token("r2")) || strings.Contains(n[0], "a writer waits") {
		t.Errorf("a writer waiting for two readers noted %q; want one note naming both, with their tokens", n)
	}
	if n := notes(waiter("reader", "w-rw", "--shared")); len(n) != 1 || !strings.Contains(n[0], "held by 2 readers: ") ||
		!strings.Contains(n[0], "; a writer waits for them first (") {
		t.Errorf("a reader queued behind a writer noted %q; want the readers and the writer it waits for", n)
	}

	startedRun(t, ep, dir, "s1", "w-pool", "--limit=2")
	startedRun(t, ep, dir, "s2", "w-pool", "--limit=2")
	waiter("first", "w-pool", "--limit=2")
	second := waiter("second", "w-pool", "--limit=2")
	// Registered after every run, so run before their own clean-ups,
	// which wait for them: the waiters wait for the holders.
	t.Cleanup(func() {
		for _, id := range append([]string{"r1", "r2", "s1", "s2"}, waiters...) {
			_ = os.WriteFile(filepath.Join(dir, id+".stop"), nil, 0o644)
		}
	})
	if n := notes(second); len(n) != 1 || !strings.Contains(n[0], "held by 2 of 2 slots: ") ||
		!strings.Contains(n[0], token("s1")) || !strings.Contains(n[0], token("s2")) {
		t.Errorf("a semaphore's waiter noted %q; want one note naming both holders, with their tokens", n)
	}
	// s1 goes and the first waiter takes its slot: the second waits on,
	// for s2 and the first, and says so once.
	if err := os.WriteFile(filepath.Join(dir, "s1.stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	etcdtest.Eventually(t, 20*time.Second, func() bool { return running(dir, "first") != "" }, "the first waiter did not run")
	renamed := func() bool {
		n := notes(second)
		return len(n) == 2 && strings.Contains(n[1], "held by 2 of 2 slots: ") && strings.Contains(n[1], token("s2")) && strings.Contains(n[1], token("first"))
	}
	for deadline := time.Now().Add(20 * time.Second); !renamed() && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if !renamed() {
		t.Errorf("the second waiter noted %q; want a second and last note naming s2 and the first waiter (%s, %s)", notes(second), token("s2"), token("first"))
	}
}
