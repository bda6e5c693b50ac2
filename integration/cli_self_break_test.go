package integration

import (
	"strings"
	"testing"
)

// A run whose lock is broken while its command runs exits 79, whatever the
// command's own status, even when the command broke the lock itself and
// exited before the session heard of the loss from its watch.
func TestCLIRunBrokenByItsCommand(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	// The command breaks its own lock (break reads ETCDLOCK_TOKEN, the
	// grant of ETCDLOCK_NAME), then exits at once with $4.
	script := `"$1" --endpoints "$2" --prefix "$3" break job >/dev/null || exit 99; exit "$4"`
	for round := range 6 {
		status := []string{"0", "3"}[round%2]
		r := cli(t, ep, nil, "run", "job", "--", "sh", "-c", script, "sh", cliPath, ep, prefixOf(t), status)
		if r.code != 79 || !strings.Contains(r.stderr, "lost while the command ran") {
			t.Fatalf("round %d, command exit %s: exit %d, stderr %q; want 79", round, status, r.code, r.stderr)
		}
	}
	if r := cli(t, ep, nil, "run", "job", "--", "true"); r.code != 0 {
		t.Errorf("a run that keeps its lock: exit %d %s", r.code, r.stderr)
	}
}
