package integration

import (
	"os"
	"path/filepath"
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

// Only a NAME position completes lock names. The COMMAND of run and elect
// completes as a shell's first word: the executables in $PATH (not files,
// not etcdlock's flags), unless it names a path; its arguments, flags
// included, complete as files (cobra's default directive, 0). The other
// commands' further arguments complete nothing.
func TestCLICompletionPositions(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	if r := cli(t, ep, nil, "acquire", "nightly", "--ttl", "60s", "--owner", "completion"); r.code != 0 {
		t.Fatalf("acquire: %d %s", r.code, r.stderr)
	}
	// A $PATH directory with one executable, one file that is not, one
	// directory.
	bin := t.TempDir()
	for name, mode := range map[string]os.FileMode{"nightly-job": 0o755, "notes": 0o644} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(bin, "nbin"), 0o755); err != nil {
		t.Fatal(err)
	}
	// And a directory named relative to the working directory, whose
	// commands run refuses (exec.ErrDot): not offered.
	rel := t.TempDir()
	if err := os.WriteFile(filepath.Join(rel, "nightly-rel"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	relDir, err := filepath.Rel(wd, rel)
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + bin + string(os.PathListSeparator) + relDir}
	const (
		shell  = ":0" // cobra.ShellCompDirectiveDefault
		noFile = ":4" // cobra.ShellCompDirectiveNoFileComp
	)
	const names, command, none = "nightly", "nightly-job", ""
	for _, tt := range []struct {
		args      []string
		want      string
		directive string
	}{
		{[]string{"run", ""}, names, noFile},
		{[]string{"run", "--try", ""}, names, noFile},
		{[]string{"run", "--", ""}, names, noFile},
		{[]string{"run", "nightly", ""}, command, noFile},
		{[]string{"run", "nightly", "n"}, command, noFile},
		{[]string{"run", "nightly", "x"}, none, noFile},
		{[]string{"run", "nightly", "./"}, none, shell},
		{[]string{"run", "--ttl", "5", "nightly", ""}, command, noFile},
		{[]string{"run", "nightly", "--", ""}, command, noFile},
		{[]string{"run", "--", "nightly", ""}, command, noFile},
		{[]string{"run", "a", "b", "--", ""}, none, shell},
		{[]string{"run", "nightly", "ls", ""}, none, shell},
		{[]string{"run", "nightly", "ls", "-"}, none, shell},
		{[]string{"run", "nightly", "ls", "--"}, none, shell},
		{[]string{"run", "--ttl", "5", "nightly", "ls", "-l", "-"}, none, shell},
		{[]string{"--endpoints", ep, "run", "nightly", "ls", "--a"}, none, shell},
		{[]string{"elect", "nightly", "ls", "-"}, none, shell},
		{[]string{"elect", "nightly", ""}, command, noFile},
		{[]string{"status", ""}, names, noFile},
		{[]string{"status", "nightly", ""}, none, noFile},
	} {
		words, directive := completion(t, ep, env, tt.args...)
		if got := strings.Join(words, " "); got != tt.want || directive != tt.directive {
			t.Errorf("completion of %q: %q %s; want %q, directive %s", tt.args, words, directive, tt.want, tt.directive)
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
