package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/etcdlock/etcdlock/cmd/internal/exitcode"
)

var update = flag.Bool("update", false, "rewrite README.md's reference section from the commands")

const (
	refBegin = "<!-- reference: generated from the commands by TestManualMatchesCommands (go test ./cmd/etcdlock -run TestManual -update) -->\n"
	refEnd   = "<!-- end of reference -->\n"
)

// The manual's reference section is the commands' own help: every command,
// every flag with its environment variable and default, and the exit
// codes. A flag added without the manual fails here.
func TestManualMatchesCommands(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok := strings.Cut(string(b), refBegin)
	if !ok {
		t.Fatalf("README.md has no line %q", refBegin)
	}
	_, after, ok := strings.Cut(rest, refEnd)
	if !ok {
		t.Fatalf("README.md has no line %q", refEnd)
	}
	root := newRootCommand(&globalOptions{stdout: io.Discard, stderr: io.Discard})
	want := reference(root)
	if *update {
		if err := os.WriteFile("README.md", []byte(before+refBegin+want+refEnd+after), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got := strings.TrimSuffix(rest, refEnd+after); got != want {
		t.Errorf("README.md's reference differs from the commands; run go test ./cmd/etcdlock -run TestManual -update\n--- README.md\n%s--- commands\n%s", got, want)
	}
	for _, c := range root.Commands() {
		if !c.Hidden && !strings.Contains(want, "### etcdlock "+c.Name()+"\n") {
			t.Errorf("command %s is missing from the reference", c.Name())
		}
	}
}

// reference renders the commands as Markdown.
func reference(root *cobra.Command) string {
	var w strings.Builder
	fmt.Fprintf(&w, "\n### Global flags\n\nEvery command accepts these.\n\n")
	flagTable(&w, root.PersistentFlags())
	for _, c := range root.Commands() {
		if c.Hidden {
			continue
		}
		fmt.Fprintf(&w, "\n### etcdlock %s\n\n    etcdlock %s\n\n%s.\n", c.Name(), c.Use, c.Short)
		if c.Name() == "exit-codes" {
			fmt.Fprintf(&w, "\n%s", exitcode.Markdown())
			continue
		}
		if fs := c.LocalNonPersistentFlags(); fs.HasAvailableFlags() {
			fmt.Fprintln(&w)
			flagTable(&w, fs)
		}
	}
	return w.String()
}

func flagTable(w io.Writer, fs *pflag.FlagSet) {
	fmt.Fprintln(w, "| flag | environment | default | meaning |")
	fmt.Fprintln(w, "|---|---|---|---|")
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		name := "--" + f.Name
		if f.Shorthand != "" {
			name = "-" + f.Shorthand + ", " + name
		}
		def := f.DefValue
		if def == "" || def == "[]" {
			def = " "
		} else {
			def = "`" + def + "`"
		}
		usage := strings.ReplaceAll(f.Usage, "|", `\|`)
		env := "`" + envName(f.Name) + "`"
		if f.Annotations[noEnv] != nil {
			env = "—"
		}
		fmt.Fprintf(w, "| `%s` | %s | %s | %s |\n", name, env, def, usage)
	})
}
