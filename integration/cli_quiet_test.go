package integration

import (
	"strings"
	"testing"
)

// -q leaves on stderr only the error that ends etcdlock: no note from
// etcdlock nor from the guardian (a stop, its SIGKILL, leftovers stopped).
func TestCLIQuietHasNoNotes(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	for _, tt := range []struct {
		name string
		args []string
		code int
		err  string // the one error line; "" for none
	}{
		{"leftovers stopped", []string{"run", "job", "--", "sh", "-c", "sleep 60 & exit 0"}, 0, ""},
		{"run timeout", []string{"run", "--run-timeout", "1", "--kill-grace", "0", "job", "--", "sh", "-c", "trap '' TERM; sleep 60 & wait"}, 124, "--run-timeout"},
		{"broken", []string{"run", "job", "--", "sh", "-c", `"$0" --endpoints "$1" --prefix "$2" break job >/dev/null && sleep 60`, cliPath, ep, "PREFIX"}, 79, "lost"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string(nil), tt.args...)
			for i, a := range args {
				if a == "PREFIX" {
					args[i] = prefixOf(t) // the subtest's, which cli gives etcdlock
				}
			}
			for _, flags := range [][]string{{"-q"}, {"-q", "-w", "json"}} {
				r := cli(t, ep, nil, append(flags, args...)...)
				lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
				if r.stderr == "" {
					lines = nil
				}
				switch {
				case r.code != tt.code:
					t.Errorf("%v: exit %d, want %d; stderr %q", flags, r.code, tt.code, r.stderr)
				case tt.err == "" && len(lines) != 0:
					t.Errorf("%v: stderr %q, want nothing", flags, r.stderr)
				case tt.err != "" && (len(lines) != 1 || !strings.Contains(lines[0], tt.err) || !strings.Contains(lines[0], "error")):
					t.Errorf("%v: stderr %q, want the one error naming %q", flags, r.stderr, tt.err)
				}
			}
		})
	}
}
