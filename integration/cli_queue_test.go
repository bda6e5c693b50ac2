package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
)

// A run of several names that waits for one of them holds none, but its
// key heads the queue of the others: status and list show it waiting
// there, as they show a waiter behind a holder, not a free name.
func TestCLISetWaiterShownQueued(t *testing.T) {
	t.Parallel()
	ep, dir := shared.Endpoints()[0], t.TempDir()
	cl := etcdtest.Client(t, ep)
	startedRun(t, ep, dir, "eu", "db-eu")
	holdingRun(t, ep, dir, "set", "db-us", "db-eu")
	// Cleanups run last first: the holder ends, then the set, which runs.
	t.Cleanup(func() { _ = os.WriteFile(filepath.Join(dir, "eu.stop"), nil, 0o644) })
	waitQueued(t, testCtx(t, time.Minute), cl, "db-us", 1)

	text := cli(t, ep, nil, "status", "db-us").stdout
	if strings.Contains(text, "free") || !strings.Contains(text, "waiter 1:") || !strings.Contains(text, "db-eu") {
		t.Errorf("status of a name a set waits at:\n%s\nwant its waiter, waiting for db-eu, and not \"free\"", text)
	}
	var st struct {
		Holder  *json.RawMessage `json:"holder"`
		Waiters []struct {
			Names []string `json:"names"`
		} `json:"waiters"`
	}
	if r := cli(t, ep, nil, "-w", "json", "status", "db-us"); json.Unmarshal([]byte(r.stdout), &st) != nil || st.Holder != nil ||
		len(st.Waiters) != 1 || strings.Join(st.Waiters[0].Names, ",") != "db-us,db-eu" {
		t.Errorf("status -w json: %s", r.stdout)
	}
	list := cli(t, ep, nil, "list").stdout
	var row string
	for _, l := range strings.Split(list, "\n") {
		if strings.HasPrefix(l, "db-us ") {
			row = l
		}
	}
	if f := strings.Fields(row); len(f) == 0 || f[len(f)-1] != "1" {
		t.Errorf("list does not show db-us with its waiter:\n%s", list)
	}
}

// A --try refused by a full semaphore names a holder with the token that
// status shows for it (its slot's), and break takes that token.
func TestCLISemaphoreRefusalToken(t *testing.T) {
	t.Parallel()
	ep, dir := shared.Endpoints()[0], t.TempDir()
	startedRun(t, ep, dir, "a", "pool", "--limit", "2")
	startedRun(t, ep, dir, "b", "pool", "--limit", "2")
	held := strings.Fields(running(dir, "a"))[1] // the oldest holder's
	r := cli(t, ep, nil, "run", "--try", "pool", "--limit", "2", "--", "true")
	if r.code != 75 || !strings.Contains(r.stderr, "(token "+held+",") {
		t.Fatalf("refused --try: exit %d, stderr %q; want 75 naming the holder's token %s", r.code, r.stderr, held)
	}
	if st := cli(t, ep, nil, "status", "pool").stdout; !strings.Contains(st, "(token "+held+",") {
		t.Errorf("status does not show token %s:\n%s", held, st)
	}
	if r := cli(t, ep, nil, "break", "pool", "--token", held); r.code != 0 {
		t.Errorf("break --token %s (the refusal's): exit %d %s", held, r.code, r.stderr)
	}
}

// A --shared --try refused because a writer waits behind the readers
// names the readers that hold the lock, not the writer that waits.
func TestCLISharedRefusalNamesTheHolders(t *testing.T) {
	t.Parallel()
	ep, dir := shared.Endpoints()[0], t.TempDir()
	cl := etcdtest.Client(t, ep)
	for _, id := range []string{"r1", "r2"} {
		startedRun(t, ep, dir, id, "catalog", "--shared")
	}
	holdingRun(t, ep, dir, "w", "catalog")
	t.Cleanup(func() {
		for _, id := range []string{"r1", "r2"} {
			_ = os.WriteFile(filepath.Join(dir, id+".stop"), nil, 0o644)
		}
	})
	waitQueued(t, testCtx(t, time.Minute), cl, "catalog", 3)
	var st struct {
		Waiters []struct {
			Token string `json:"token"`
		} `json:"waiters"`
	}
	if r := cli(t, ep, nil, "-w", "json", "status", "catalog"); json.Unmarshal([]byte(r.stdout), &st) != nil || len(st.Waiters) != 1 {
		t.Fatalf("status: %s", r.stdout)
	}
	r := cli(t, ep, nil, "run", "--try", "--shared", "catalog", "--", "true")
	r1 := strings.Fields(running(dir, "r1"))[1]
	t.Logf("refusal: %s", r.stderr)
	if r.code != 75 || !strings.Contains(r.stderr, "(token "+r1+",") || strings.Contains(r.stderr, "(token "+st.Waiters[0].Token+",") ||
		!strings.Contains(r.stderr, "2 readers") {
		t.Errorf("refused --shared --try: exit %d, stderr %q; want 75 naming the 2 readers (oldest token %s), not the waiting writer (token %s)",
			r.code, r.stderr, r1, st.Waiters[0].Token)
	}
}

// A waiter cut off from etcd past its lease loses its session before its
// command ran: it exits with the code of a loss while waiting, not 79
// (lost while the command ran).
func TestCLIWaiterLostBeforeRunning(t *testing.T) {
	t.Parallel()
	ep, dir := shared.Endpoints()[0], t.TempDir()
	cl := etcdtest.Client(t, ep)
	startedRun(t, ep, dir, "h", "job")
	p, proxyURL := etcdtest.Proxy(t, ep)
	ran := filepath.Join(dir, "ran")
	w := cliCommand(t, proxyURL, nil, "run", "job", "--ttl", "2", "--", "touch", ran)
	var stderr strings.Builder
	w.Stderr = &stderr
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	waitQueued(t, testCtx(t, time.Minute), cl, "job", 2)
	p.BlackholeTx()
	p.BlackholeRx()
	err := w.Wait()
	if code := exitCodeOf(err); code != 80 || !strings.Contains(stderr.String(), "while waiting") {
		t.Errorf("waiter cut off: exit %d, stderr %q; want 80, lost while waiting", code, stderr.String())
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the command ran")
	}
}

// --timeout bounds the wait for a holder: a free lock is acquired however
// short it is, and a held one still times out.
func TestCLITinyTimeoutOnAFreeLock(t *testing.T) {
	t.Parallel()
	ep, dir := shared.Endpoints()[0], t.TempDir()
	for _, flags := range [][]string{{"--timeout", "1ms"}, {"--timeout", "1ms", "--shared"}, {"--timeout", "1ms", "--limit", "2"}} {
		args := append(append([]string{"run", "job"}, flags...), "--", "true")
		if r := cli(t, ep, nil, args...); r.code != 0 {
			t.Errorf("run %v on a free lock: exit %d %s, want 0", flags, r.code, r.stderr)
		}
	}
	startedRun(t, ep, dir, "h", "job")
	if r := cli(t, ep, nil, "run", "job", "--timeout", "1ms", "--", "true"); r.code != 124 {
		t.Errorf("run --timeout 1ms on a held lock: exit %d %s, want 124", r.code, r.stderr)
	}
}

// A run whose kind or limit disagrees with the name's contenders exits
// with its own code, not the code of a held lock, and -E leaves it alone.
func TestCLIKindMismatchExitCode(t *testing.T) {
	t.Parallel()
	ep, dir := shared.Endpoints()[0], t.TempDir()
	startedRun(t, ep, dir, "plain", "plain")
	startedRun(t, ep, dir, "pool", "pool", "--limit", "2")
	for _, args := range [][]string{
		{"run", "--try", "plain", "--limit", "3"},
		{"run", "plain", "--limit", "3"},
		{"run", "--try", "pool", "--shared"},
		{"run", "pool", "--shared"},
		{"run", "pool", "--limit", "3"},
		{"-E", "3", "run", "pool"},
	} {
		r := cli(t, ep, nil, append(args, "--", "true")...)
		if r.code != 76 || !strings.Contains(r.stderr, "another limit") {
			t.Errorf("%v: exit %d %q, want 76 naming the mismatch", args, r.code, r.stderr)
		}
	}
}

// As flock: `run NAME COMMAND ARGS...` needs no "--", and COMMAND's flags
// are its own; after "--" a name may start with "-".
func TestCLICommandWithoutDash(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	r := cli(t, ep, nil, "run", "--ttl", "5", "job", "printf", "%s|", "-q", "--ttl", "-w")
	if r.code != 0 || r.stdout != "-q|--ttl|-w|" {
		t.Errorf("run job printf ...: exit %d, stdout %q, stderr %q; want the command's flags passed to it", r.code, r.stdout, r.stderr)
	}
	r = cli(t, ep, nil, "run", "--", "-job", "sh", "-c", `printf %s "$ETCDLOCK_NAME"`)
	if r.code != 0 || r.stdout != "-job" {
		t.Errorf("run -- -job sh -c ...: exit %d, stdout %q, stderr %q; want the name -job", r.code, r.stdout, r.stderr)
	}
	r = cli(t, ep, nil, "run", "-q", "--", "-a", "-b", "--", "sh", "-c", `printf %s "$ETCDLOCK_NAMES"`)
	if r.code != 0 || r.stdout != "-a\n-b" {
		t.Errorf("run -- -a -b -- sh -c ...: exit %d, stdout %q, stderr %q; want the names -a and -b", r.code, r.stdout, r.stderr)
	}
}

// --run-timeout stops the command as a loss does, releases the lock and
// exits 124, -E or not; a --kill-grace cut to the lease's deadline is
// stated, one that fits is not.
func TestCLIRunTimeout(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	r := cli(t, ep, nil, "-E", "3", "run", "--run-timeout", "0.5", "--kill-grace", "1", "job", "sleep", "100")
	if r.code != 124 || !strings.Contains(r.stderr, "--run-timeout") || strings.Contains(r.stderr, "cut short") {
		t.Errorf("run --run-timeout 0.5 sleep 100: exit %d, stderr %q; want 124, the timeout named, no cut", r.code, r.stderr)
	}
	if st := cli(t, ep, nil, "status", "job").stdout; !strings.Contains(st, "free") {
		t.Errorf("the lock was not released: %s", st)
	}
	r = cli(t, ep, nil, "run", "--ttl", "2", "--run-timeout", "0.5", "--kill-grace", "60", "job", "sh", "-c", `trap "" TERM; while :; do sleep 0.1; done`)
	if r.code != 124 || !strings.Contains(r.stderr, "--kill-grace 1m0s cut short") {
		t.Errorf("a grace past the lease's deadline: exit %d, stderr %q; want 124 and the cut stated", r.code, r.stderr)
	}
	// The notice goes to stderr alone: stdout is what scripts eval or parse.
	if r := cli(t, ep, nil, "--command-timeout", "2s", "-w", "json", "status", "job"); r.code != 0 || !strings.Contains(r.stderr, "deprecated") ||
		!strings.HasPrefix(r.stdout, "{") || strings.Contains(r.stdout, "deprecated") {
		t.Errorf("--command-timeout: exit %d, stdout %q, stderr %q; want it to work, deprecated on stderr, JSON alone on stdout", r.code, r.stdout, r.stderr)
	}
}
