package exitcode

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// The CLI manual's exit-code table is this package's table, row for row.
func TestREADMETableMatches(t *testing.T) {
	b, err := os.ReadFile("../../etcdlock/README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n### Exit codes\n")
	if !ok {
		t.Fatal("cmd/etcdlock/README.md has no '### Exit codes' section")
	}
	var table strings.Builder
	started := false
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "|") {
			started = true
			table.WriteString(line + "\n")
		} else if started {
			break
		}
	}
	if got, want := table.String(), Markdown(); got != want {
		t.Errorf("cmd/etcdlock/README.md's exit-code table differs from exitcode.Table():\n--- cmd/etcdlock/README.md\n%s--- want\n%s", got, want)
	}
}

// Every code named in the constants appears in the table once.
func TestTableHasEveryCode(t *testing.T) {
	seen := map[string]int{}
	for _, r := range Table() {
		for _, c := range strings.Split(r.Code, ", ") {
			seen[c]++
		}
	}
	for _, code := range []int{OK, Error, Usage, Unavailable, Internal, NotAcquired, Permission, Config, Lost, Timeout, CannotExecute, NotFound} {
		if c := strconv.Itoa(code); seen[c] != 1 {
			t.Errorf("code %s appears %d times in Table", c, seen[c])
		}
	}
}
