package integration

import (
	"strings"
	"testing"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
)

// completion runs `etcdlock __complete args...` and returns the
// completions and the directive line (":4").
func completion(t *testing.T, ep string, env []string, args ...string) (words []string, directive string) {
	t.Helper()
	r := cli(t, ep, env, append([]string{"__complete"}, args...)...)
	if r.code != 0 {
		t.Fatalf("__complete %q: exit %d %s", args, r.code, r.stderr)
	}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if strings.HasPrefix(line, ":") {
			directive = line
		} else if line != "" {
			words = append(words, line)
		}
	}
	return words, directive
}

// Only a NAME position completes lock names: the COMMAND of run and elect
// and its arguments, flags included, complete as a shell command (files:
// cobra's default directive, 0), not as etcdlock's flags; the other
// commands' further arguments complete nothing.
func TestCLICompletionPositions(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	if r := cli(t, ep, nil, "acquire", "nightly", "--ttl", "60s", "--owner", "completion"); r.code != 0 {
		t.Fatalf("acquire: %d %s", r.code, r.stderr)
	}
	const (
		shell  = ":0" // cobra.ShellCompDirectiveDefault
		noFile = ":4" // cobra.ShellCompDirectiveNoFileComp
	)
	for _, tt := range []struct {
		args      []string
		names     bool
		directive string
	}{
		{[]string{"run", ""}, true, noFile},
		{[]string{"run", "--try", ""}, true, noFile},
		{[]string{"run", "--", ""}, true, noFile},
		{[]string{"run", "nightly", ""}, false, shell},
		{[]string{"run", "nightly", "n"}, false, shell},
		{[]string{"run", "--ttl", "5", "nightly", ""}, false, shell},
		{[]string{"run", "nightly", "--", ""}, false, shell},
		{[]string{"run", "--", "nightly", ""}, false, shell},
		{[]string{"run", "a", "b", "--", ""}, false, shell},
		{[]string{"run", "nightly", "ls", ""}, false, shell},
		{[]string{"run", "nightly", "ls", "-"}, false, shell},
		{[]string{"run", "nightly", "ls", "--"}, false, shell},
		{[]string{"run", "--ttl", "5", "nightly", "ls", "-l", "-"}, false, shell},
		{[]string{"--endpoints", ep, "run", "nightly", "ls", "--a"}, false, shell},
		{[]string{"elect", "nightly", "ls", "-"}, false, shell},
		{[]string{"elect", "nightly", ""}, false, shell},
		{[]string{"status", ""}, true, noFile},
		{[]string{"status", "nightly", ""}, false, noFile},
	} {
		words, directive := completion(t, ep, nil, tt.args...)
		if got := strings.Join(words, " ") == "nightly"; got != tt.names || !got && len(words) > 0 || directive != tt.directive {
			t.Errorf("completion of %q: %q %s; want names %v, directive %s", tt.args, words, directive, tt.names, tt.directive)
		}
	}
}

// --endpoints on the command line wins over ETCDLOCK_ENDPOINTS in a
// completion, as in every other call: the names come from the flag's etcd.
func TestCLICompletionEndpointsFlagWins(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	other := etcdtest.Cluster(t).Endpoints()[0]
	for _, c := range []struct{ ep, name string }{{ep, "right"}, {other, "wrong"}} {
		if r := cli(t, c.ep, nil, "acquire", c.name, "--ttl", "60s", "--owner", "completion"); r.code != 0 {
			t.Fatalf("acquire %s: %d %s", c.name, r.code, r.stderr)
		}
	}
	// The client balances over the endpoints it is given: several rounds,
	// so that an endpoint from the environment among them is asked.
	for _, env := range []string{"ETCDLOCK_ENDPOINTS=" + other, "ETCDCTL_ENDPOINTS=" + other} {
		for range 8 {
			if words, _ := completion(t, ep, []string{env}, "status", ""); strings.Join(words, " ") != "right" {
				t.Fatalf("with %s and --endpoints %s: completed %q, want right", env, ep, words)
			}
		}
	}
}
