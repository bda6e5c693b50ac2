package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The command's parent is its guardian: etcdlock-guardian when it is
// installed beside etcdlock (as make build, go install and the release
// archives put it), else etcdlock itself, re-executed.
//
// Not parallel: it writes an executable and runs it, which fails with
// ETXTBSY if another test's fork inherits the file while it is open.
func TestCLIRunStartsTheGuardianBinaryBesideItElseItself(t *testing.T) {
	ep := shared.Endpoints()[0]
	parentExe := []string{"run", "guardian-exe", "--", "sh", "-c", `readlink /proc/$PPID/exe`}

	r := cli(t, ep, nil, parentExe...)
	if r.code != 0 || filepath.Base(strings.TrimSpace(r.stdout)) != "etcdlock-guardian" {
		t.Fatalf("with etcdlock-guardian beside etcdlock: exit %d, the command's parent %q, want etcdlock-guardian; stderr %s", r.code, r.stdout, r.stderr)
	}

	// A copy of etcdlock alone in a directory.
	alone := filepath.Join(t.TempDir(), "etcdlock")
	b, err := os.ReadFile(cliPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(alone, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := cliCommand(t, ep, nil, parentExe...)
	cmd.Path = alone
	out, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(out)) != alone {
		t.Fatalf("etcdlock alone: %v, the command's parent %q, want %s", err, out, alone)
	}

	// Beside an etcdlock-guardian that cannot run here (the kernel
	// refuses it: exec format error, as for another machine's binary).
	if err := os.WriteFile(filepath.Join(filepath.Dir(alone), "etcdlock-guardian"), []byte("\x7fELF not really\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd = cliCommand(t, ep, nil, parentExe...)
	cmd.Path = alone
	out, err = cmd.Output()
	if err != nil || strings.TrimSpace(string(out)) != alone {
		t.Fatalf("beside a guardian that cannot run: %v, the command's parent %q, want %s", err, out, alone)
	}
}
