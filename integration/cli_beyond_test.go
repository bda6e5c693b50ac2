package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
)

func TestCLISemaphore(t *testing.T) {
	t.Parallel()
	ep, dir := shared.Endpoints()[0], t.TempDir()
	a := holdingRun(t, ep, dir, "a", "pool", "--limit", "2")
	b := holdingRun(t, ep, dir, "b", "pool", "--limit", "2")
	etcdtest.Eventually(t, 20*time.Second, func() bool { return running(dir, "a") != "" && running(dir, "b") != "" },
		"two runs of a limit-2 semaphore did not both start")
	sa, sb := strings.Fields(running(dir, "a"))[0], strings.Fields(running(dir, "b"))[0]
	if sa == sb || sa == "-" || sb == "-" || (sa != "0" && sa != "1") || (sb != "0" && sb != "1") {
		t.Fatalf("ETCDLOCK_SLOT of the two holders: %q and %q, want 0 and 1", sa, sb)
	}

	if r := cli(t, ep, nil, "run", "--try", "pool", "--limit", "2", "--", "true"); r.code != 75 {
		t.Fatalf("third --try run of a full semaphore: exit %d (%s), want 75", r.code, r.stderr)
	}
	if r := cli(t, ep, nil, "run", "--try", "pool", "--limit", "3", "--", "true"); r.code != 76 || !strings.Contains(r.stderr, "another limit") {
		t.Fatalf("run with --limit 3 beside holders of limit 2: exit %d (%s), want 76 naming the limit", r.code, r.stderr)
	}
	if r := cli(t, ep, nil, "run", "pool", "--limit", "2", "--shared", "--", "true"); r.code != 64 {
		t.Fatalf("--limit with --shared: exit %d, want 64", r.code)
	}

	r := cli(t, ep, nil, "-w", "json", "status", "pool")
	var st statusJSON
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || r.code != 0 {
		t.Fatalf("status -w json: exit %d %v: %s", r.code, err, r.stdout)
	}
	if len(st.Holders) != 2 || st.Holders[0].Slot == nil || st.Holders[1].Slot == nil || *st.Holders[0].Slot == *st.Holders[1].Slot {
		t.Fatalf("status holders = %+v, want two with distinct slots", st.Holders)
	}
	if text := cli(t, ep, nil, "status", "pool").stdout; !strings.Contains(text, "held by 2 of 2 slots") || !strings.Contains(text, "slot 0:") {
		t.Errorf("status text does not show the slots:\n%s", text)
	}
	if text := cli(t, ep, nil, "list").stdout; !strings.Contains(text, "(+1 more)") {
		t.Errorf("list does not count the second holder:\n%s", text)
	}
	// list -w json gives each name status's holders, of the same shape.
	r = cli(t, ep, nil, "-w", "json", "list", "pool")
	var names []statusJSON
	if err := json.Unmarshal([]byte(r.stdout), &names); err != nil || r.code != 0 || len(names) == 0 {
		t.Fatalf("list -w json: exit %d %v: %s", r.code, err, r.stdout)
	}
	if got, want := mustJSON(t, names[0].Holders), mustJSON(t, st.Holders); len(names) != 1 || got != want {
		t.Errorf("list -w json = %+v, want one name with status's holders %+v", names, st.Holders)
	}

	// A waiting run takes the slot the first run frees, with a higher token.
	c := waitingRun(t, ep, dir, "c", "pool", "--limit", "2")
	if running(dir, "c") != "" {
		t.Fatal("a third holder started while the semaphore was full")
	}
	if err := os.WriteFile(filepath.Join(dir, "a.stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := a.Wait(); err != nil {
		t.Fatalf("first run: %v", err)
	}
	etcdtest.Eventually(t, 20*time.Second, func() bool { return running(dir, "c") != "" }, "the waiting run did not start after a slot was freed")
	fa, fc := strings.Fields(running(dir, "a")), strings.Fields(running(dir, "c"))
	ta, _ := strconv.ParseInt(fa[1], 10, 64)
	tc, _ := strconv.ParseInt(fc[1], 10, 64)
	if fc[0] != fa[0] || tc <= ta {
		t.Errorf("waiting run got slot %s token %s; want the freed slot %s with a token above %s", fc[0], fc[1], fa[0], fa[1])
	}
	_, _ = b, c
}

func TestCLISharedRun(t *testing.T) {
	t.Parallel()
	ep, dir := shared.Endpoints()[0], t.TempDir()
	holdingRun(t, ep, dir, "r1", "catalog", "--shared")
	holdingRun(t, ep, dir, "r2", "catalog", "--shared")
	etcdtest.Eventually(t, 20*time.Second, func() bool { return running(dir, "r1") != "" && running(dir, "r2") != "" },
		"two --shared runs did not both start")
	if r := cli(t, ep, nil, "run", "--try", "catalog", "--", "true"); r.code != 75 {
		t.Fatalf("writer --try while readers run: exit %d, want 75", r.code)
	}
	if r := cli(t, ep, nil, "run", "--try", "catalog", "--shared", "--", "true"); r.code != 0 {
		t.Fatalf("reader --try while readers run: exit %d (%s), want 0", r.code, r.stderr)
	}
	if text := cli(t, ep, nil, "status", "catalog").stdout; !strings.Contains(text, "held by 2 readers") {
		t.Errorf("status text does not show the readers:\n%s", text)
	}
}

// statusJSON is what the tests read of `status -w json`.
type statusJSON struct {
	Holders []struct {
		Owner  string `json:"owner"`
		Slot   *int   `json:"slot"`
		Shared bool   `json:"shared"`
	} `json:"holders"`
}

func TestCLIRunSeveralNames(t *testing.T) {
	t.Parallel()
	ep, dir := shared.Endpoints()[0], t.TempDir()
	r := cli(t, ep, nil, "run", "a", "b", "--shell", "--", `printf '%s|%s' "$ETCDLOCK_NAMES" "$ETCDLOCK_NAME"`)
	if r.code != 0 || r.stdout != "a\nb|a" {
		t.Fatalf("run a b: exit %d, output %q (%s); want ETCDLOCK_NAMES \"a\\nb\" and ETCDLOCK_NAME a", r.code, r.stdout, r.stderr)
	}
	holdingRun(t, ep, dir, "ab", "a", "b")
	etcdtest.Eventually(t, 20*time.Second, func() bool { return running(dir, "ab") != "" }, "run a b did not start")
	if r := cli(t, ep, nil, "run", "--try", "b", "--", "true"); r.code != 75 {
		t.Fatalf("--try b while a set holds it: exit %d, want 75", r.code)
	}
	// The same names the other way round wait, and take over when the
	// first set ends.
	waitingRun(t, ep, dir, "ba", "b", "a")
	if running(dir, "ba") != "" {
		t.Fatal("run b a started while run a b holds both")
	}
	if err := os.WriteFile(filepath.Join(dir, "ab.stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	etcdtest.Eventually(t, 20*time.Second, func() bool { return running(dir, "ba") != "" }, "run b a did not start after run a b ended")
	if r := cli(t, ep, nil, "run", "a", "b", "--try", "--", "true"); r.code != 64 {
		t.Errorf("several names with --try: exit %d, want 64", r.code)
	}
}

// waitsOutDelay is what a run logs at --log-level info when it waits out
// a lock-delay.
const waitsOutDelay = "waiting out the lock-delay"

// TestCLILockDelay: a run killed with SIGKILL makes the next run wait the
// lock-delay after its lease expired; a run that exits does not.
func TestCLILockDelay(t *testing.T) {
	t.Parallel()
	const delay = 3 * time.Second
	ep, dir := shared.Endpoints()[0], t.TempDir()
	cl := etcdtest.Client(t, ep)
	// Clean: the first run exits, the next does not wait out the
	// lock-delay (it says so at --log-level info, as the unclean case
	// below checks).
	if r := cli(t, ep, nil, "run", "job", "--lock-delay", delay.String(), "--", "true"); r.code != 0 {
		t.Fatalf("first run: exit %d: %s", r.code, r.stderr)
	}
	r := cli(t, ep, nil, "run", "job", "--lock-delay", delay.String(), "--log-level", "info", "--", "true")
	if r.code != 0 {
		t.Fatalf("second run: exit %d: %s", r.code, r.stderr)
	}
	if strings.Contains(r.stderr, waitsOutDelay) {
		t.Errorf("a run after a clean one waited out the lock-delay:\n%s", r.stderr)
	}
	// Unclean: kill -9 the holder; its lease expires after the TTL.
	holder := holdingRun(t, ep, dir, "h", "job", "--lock-delay", delay.String(), "--ttl", "2s")
	etcdtest.Eventually(t, 20*time.Second, func() bool { return running(dir, "h") != "" }, "the holder did not start")
	pfx := prefixOf(t) + "job/"
	keys, err := cl.Get(testCtx(t, time.Minute), pfx, clientv3.WithPrefix())
	if err != nil || len(keys.Kvs) != 1 {
		t.Fatalf("holder's key: %v %v", keys, err)
	}
	gone := cl.Watch(testCtx(t, time.Minute), string(keys.Kvs[0].Key), clientv3.WithFilterPut(), clientv3.WithRev(keys.Header.Revision+1))
	if err := holder.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	next := cliCommand(t, ep, nil, "run", "job", "--lock-delay", delay.String(), "--log-level", "info", "--", "true")
	var nextErr bytes.Buffer
	next.Stderr = &nextErr
	if err := next.Start(); err != nil {
		t.Fatal(err)
	}
	wr := <-gone
	if len(wr.Events) == 0 {
		t.Fatalf("watch of the holder's key ended: %v", wr.Err())
	}
	deleted := time.Now()
	if err := next.Wait(); err != nil {
		t.Fatalf("next run: %v", err)
	}
	if took := time.Since(deleted); took < delay-100*time.Millisecond {
		t.Errorf("the next run ended %v after the killed holder's key went, want at least the lock-delay %v", took, delay)
	}
	if !strings.Contains(nextErr.String(), waitsOutDelay) {
		t.Errorf("the run after a killed one did not say it waits out the lock-delay:\n%s", nextErr.String())
	}
	if r := cli(t, ep, nil, "run", "job", "--lock-delay", "1s", "--limit", "2", "--", "true"); r.code != 64 {
		t.Errorf("--lock-delay with --limit: exit %d, want 64", r.code)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
