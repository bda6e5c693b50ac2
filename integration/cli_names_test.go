package integration

import (
	"strings"
	"testing"
)

// Lock names written as paths are separate locks from their parents, in
// every command that takes a name.
func TestCLINamesWithSlashes(t *testing.T) {
	ep := shared.Endpoints()[0]
	if r := cli(t, ep, nil, "acquire", "jobs/nightly", "--owner", "a", "--ttl", "30s"); r.code != 0 {
		t.Fatalf("acquire jobs/nightly: %d %s", r.code, r.stderr)
	}
	if r := cli(t, ep, nil, "run", "--try", "jobs", "--", "true"); r.code != 0 {
		t.Errorf("run --try jobs while jobs/nightly is held: %d %s", r.code, r.stderr)
	}
	if r := cli(t, ep, nil, "run", "--try", "jobs/nightly", "--", "true"); r.code != 75 || !strings.Contains(r.stderr, `"jobs/nightly" is held by a`) {
		t.Errorf("run --try jobs/nightly: %d %q, want 75 held by a", r.code, r.stderr)
	}
	if r := cli(t, ep, nil, "status", "jobs"); !strings.Contains(r.stdout, "free") {
		t.Errorf("status jobs: %q", r.stdout)
	}
	if r := cli(t, ep, nil, "status", "jobs/nightly"); !strings.Contains(r.stdout, "held by a") {
		t.Errorf("status jobs/nightly: %q", r.stdout)
	}
	if r := cli(t, ep, nil, "list", "jobs/"); !strings.Contains(r.stdout, "jobs/nightly") || strings.Contains(r.stdout, "%2F") {
		t.Errorf("list jobs/: %q", r.stdout)
	}
}
