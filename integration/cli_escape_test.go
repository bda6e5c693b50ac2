package integration

import (
	"strings"
	"testing"
)

// Names and owners are printed escaped when they hold what a terminal
// would act on (a newline, an ANSI escape): a name cannot forge a line
// of list, or clear the operator's screen through status, a note or
// break.
func TestCLIPrintsNamesAndOwnersEscaped(t *testing.T) {
	t.Parallel()
	ep := shared.Endpoints()[0]
	name := "a\nb     forged       1  now  0"
	owner := "o\x1b[2J"
	if r := cli(t, ep, nil, "acquire", name, "--owner", owner, "--ttl", "60s"); r.code != 0 {
		t.Fatalf("acquire: %d %s", r.code, r.stderr)
	}
	raw := func(s string) bool {
		return strings.Contains(s, "\x1b") || strings.Contains(s, "forged") && !strings.Contains(s, `a\nb`)
	}
	outputs := map[string]cliResult{
		"list":   cli(t, ep, nil, "list"),
		"status": cli(t, ep, nil, "status", name),
		"leader": cli(t, ep, nil, "leader", name),
		"note":   cli(t, ep, nil, "run", "--try", name, "--", "true"),
	}
	if lines := strings.Split(strings.TrimSpace(outputs["list"].stdout), "\n"); len(lines) != 2 {
		t.Errorf("list printed %d lines for one lock:\n%s", len(lines), outputs["list"].stdout)
	}
	for what, r := range outputs {
		if raw(r.stdout) || raw(r.stderr) {
			t.Errorf("%s printed the name or owner raw:\n%q\n%q", what, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stdout+r.stderr, `\x1b[2J`) {
			t.Errorf("%s does not show the owner escaped:\n%q\n%q", what, r.stdout, r.stderr)
		}
	}
	tok := strings.Fields(strings.SplitN(outputs["status"].stdout, "(token ", 2)[1])[0]
	tok = strings.TrimSuffix(tok, ",")
	r := cli(t, ep, nil, "break", name, "--token", tok)
	if r.code != 0 || raw(r.stdout) || !strings.Contains(r.stdout, `a\nb`) {
		t.Errorf("break: %d %q %q", r.code, r.stdout, r.stderr)
	}
}
