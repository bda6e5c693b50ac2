//go:build linux

package integration

import (
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// What the commands print agrees: counts in the singular, signals by
// their names, leader's JSON shaped as status's, dev's usage line, shell
// completion of lock names and of flag values.
func TestCLIConsistentOutput(t *testing.T) {
	t.Parallel()
	ep, dir := shared.Endpoints()[0], t.TempDir()
	startedRun(t, ep, dir, "r", "catalog", "--shared")
	if st := cli(t, ep, nil, "status", "catalog").stdout; !strings.Contains(st, "held by 1 reader\n") {
		t.Errorf("status of one reader:\n%s", st)
	}

	// Every field of the holder alike, but the lease's remaining TTL,
	// which may tick between the two reads.
	var leader, status struct {
		Name   string         `json:"name"`
		Holder map[string]any `json:"holder"`
	}
	for v, args := range map[any][]string{&leader: {"-w", "json", "leader", "catalog"}, &status: {"-w", "json", "status", "catalog"}} {
		if r := cli(t, ep, nil, args...); r.code != 0 || json.Unmarshal([]byte(r.stdout), v) != nil {
			t.Fatalf("%v: exit %d %s", args, r.code, r.stdout)
		}
	}
	for _, h := range []map[string]any{leader.Holder, status.Holder} {
		if _, ok := h["lease_ttl_seconds"]; !ok {
			t.Errorf("holder %v has no lease_ttl_seconds", h)
		}
		delete(h, "lease_ttl_seconds")
	}
	if leader.Holder == nil || !maps.EqualFunc(leader.Holder, status.Holder, func(a, b any) bool { return fmt.Sprint(a) == fmt.Sprint(b) }) || leader.Name != "catalog" || len(leader.Holder) < 6 {
		t.Errorf("leader -w json %v, status -w json %v: want the same holder", leader.Holder, status.Holder)
	}
	if r := cli(t, ep, nil, "-w", "json", "leader", "nobody"); !strings.Contains(r.stdout, `"holder":null`) {
		t.Errorf("leader -w json of a free name: %s", r.stdout)
	}

	if out, err := exec.Command(cliPath, "dev", "--help").CombinedOutput(); err != nil || !strings.Contains(string(out), "\n  etcdlock dev [") {
		t.Errorf("dev --help: %v\n%s", err, out)
	}

	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"status", "cat"}, []string{"catalog"}},
		{[]string{"run", ""}, []string{"catalog"}},
		{[]string{"status", "-w", ""}, []string{"simple", "json"}},
		{[]string{"run", "--kill-signal", ""}, []string{"TERM", "KILL"}},
	} {
		r := cli(t, ep, nil, append([]string{"__complete"}, tt.args...)...)
		for _, w := range tt.want {
			if !strings.Contains("\n"+r.stdout, "\n"+w+"\n") {
				t.Errorf("completion of %q: %q, want %s among them", tt.args, r.stdout, w)
			}
		}
	}

	g := runGuarded(t, ep, "trap '' TERM\n"+leaveBehind+"wait", "--ttl", "3s", "--kill-grace", "1")
	if err := syscall.Kill(g.guardianOf(t), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	g.deadAt(t, 10*time.Second)
	_ = g.cmd.Wait()
	if got := g.stderr.String(); !strings.Contains(got, "received SIGTERM") || strings.Contains(got, "terminated") {
		t.Errorf("stderr %q: want the signal named SIGTERM", got)
	}
}
