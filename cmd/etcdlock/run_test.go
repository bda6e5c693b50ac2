package main

import (
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/etcdlock/etcdlock/cmd/internal/exitcode"
)

// split parses a command line of run or elect as Main does and returns
// the names and the command.
func split(t *testing.T, args []string) (names, argv []string, err error) {
	t.Helper()
	root := newRootCommand(&globalOptions{stdout: io.Discard, stderr: io.Discard})
	args = implicitDash(root, args)
	cmd, rest, err := root.Find(args)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return nil, nil, err
	}
	return splitCommand(cmd, cmd.Flags().Args())
}

func TestCommandArgs(t *testing.T) {
	tests := []struct {
		args    []string
		names   string // joined by spaces
		argv    string
		wantErr string // "" for valid; %s is the command's name
	}{
		{[]string{"a", "--", "true"}, "a", "true", ""},
		{[]string{"a", "--", "sh", "-c", "exit 3"}, "a", "sh -c exit 3", ""},
		{[]string{"--ttl", "5s", "a", "--", "true"}, "a", "true", ""},
		{[]string{"a", "--ttl", "5s", "--", "true", "--ttl"}, "a", "true --ttl", ""},
		// As flock: no "--", COMMAND after NAME, its flags its own.
		{[]string{"a", "true"}, "a", "true", ""},
		{[]string{"a", "ls", "-l", "--ttl", "5"}, "a", "ls -l --ttl 5", ""},
		{[]string{"--ttl", "5", "-q", "a", "ls", "-l"}, "a", "ls -l", ""},
		// With a "--", the first one ends the names.
		{[]string{"a", "--", "git", "log", "--", "f"}, "a", "git log -- f", ""},
		// A name that starts with "-", after "--".
		{[]string{"--", "-a", "true"}, "-a", "true", ""},
		{[]string{"--ttl", "5", "--", "-a", "sh", "-c", "exit 3"}, "-a", "sh -c exit 3", ""},
		{nil, "", "", "missing lock NAME"},
		{[]string{"a"}, "", "", "missing COMMAND: use %s NAME COMMAND"},
		{[]string{"a", "--"}, "", "", "missing COMMAND"},
		{[]string{"--", "true"}, "", "", "missing COMMAND"},
		{[]string{"", "--", "true"}, "", "", "invalid name"},
	}
	for _, name := range []string{"run", "elect"} {
		for _, tt := range tests {
			t.Run(name+" "+strings.Join(tt.args, " "), func(t *testing.T) {
				names, argv, err := split(t, append([]string{name}, tt.args...))
				if tt.wantErr == "" {
					if err != nil || strings.Join(names, " ") != tt.names || strings.Join(argv, " ") != tt.argv {
						t.Fatalf("names %q command %q err %v; want %q and %q", names, argv, err, tt.names, tt.argv)
					}
					return
				}
				want := strings.ReplaceAll(tt.wantErr, "%s", name)
				if err == nil || exitCode(err) != exitcode.Usage || !strings.Contains(err.Error(), want) {
					t.Fatalf("split = %v (exit %d), want a usage error mentioning %q", err, exitCode(err), want)
				}
			})
		}
	}
}

func TestRunNamesArgs(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		names   []string
		wantErr string
	}{
		{[]string{"a", "b", "c", "--", "true"}, []string{"a", "b", "c"}, ""},
		{[]string{"--", "-a", "-b", "--", "true"}, []string{"-a", "-b"}, ""},
		{[]string{"a", "b", "true"}, []string{"a"}, ""}, // without "--", one name: b is the command
		{[]string{"a", "b", "a", "--", "true"}, nil, "given twice"},
		{[]string{"a", "", "--", "true"}, nil, "invalid name"},
		{[]string{"a", "b", "--"}, nil, "missing COMMAND"},
	} {
		names, _, err := split(t, append([]string{"run"}, tt.args...))
		if tt.wantErr == "" && (err != nil || !slices.Equal(names, tt.names)) ||
			tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("run %v: names %q, %v; want %q %q", tt.args, names, err, tt.names, tt.wantErr)
		}
	}
	if _, _, err := split(t, []string{"elect", "a", "b", "--", "true"}); err == nil || !strings.Contains(err.Error(), "one NAME") {
		t.Errorf("elect a b -- true: %v, want a usage error", err)
	}
}

// run's lock flags are checked by the library's option checks before
// anything starts: a value out of range or two flags that cannot be
// combined are a usage error (64) naming the flag, with no etcd to reach.
func TestRunLockFlagsAreChecked(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--limit", "0"}, "--limit"},
		{[]string{"--limit", "65537"}, "--limit"},
		{[]string{"--lock-delay", "-1s"}, "--lock-delay"},
		{[]string{"--lock-delay", "2h"}, "--lock-delay"},
		{[]string{"--limit", "2", "--shared"}, "cannot be combined"},
		{[]string{"--lock-delay", "1s", "--shared"}, "plain locks"},
		{[]string{"--prefix", "/no-slash"}, "--prefix"},
	} {
		args := append(append([]string{"--endpoints", "127.0.0.1:1", "run"}, tt.args...), "a", "--", "true")
		var stdout, stderr strings.Builder
		code := Main(args, strings.NewReader(""), &stdout, &stderr)
		if code != exitcode.Usage || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("etcdlock %s: exit %d (%s), want %d mentioning %q", strings.Join(args, " "), code, strings.TrimSpace(stderr.String()), exitcode.Usage, tt.want)
		}
	}
}

// The flags that several names refuse (exit 64) say so in their help,
// which the manual prints.
func TestSingleNameFlagsSaySo(t *testing.T) {
	cmd := newRunCommand(&globalOptions{})
	for _, name := range []string{"try", "limit", "shared", "lock-delay"} {
		if f := cmd.Flags().Lookup(name); f == nil || !strings.Contains(f.Usage, "One NAME only") {
			t.Errorf("--%s's help does not say that it takes one NAME only: %v", name, f)
		}
	}
}
