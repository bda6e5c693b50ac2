package snippets

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readmes maps each README, from the repository's root, to the packages
// whose Examples hold its snippets.
var readmes = map[string][]string{
	"README.md":              {"pkg/lock", "pkg/kubelock"},
	"pkg/lock/README.md":     {"pkg/lock"},
	"pkg/kubelock/README.md": {"pkg/kubelock"},
	"fencing/README.md":      {"fencing"},
	"pkg/election/README.md": {"pkg/election"},
}

// Each line of every ```go block of each README, and each line a ```diff
// block adds or keeps, is, in order, a line of one of the Example functions
// of the package it documents (compared with runs of blanks as one space;
// blank lines and placeholders are skipped).
func TestReadmeSnippets(t *testing.T) {
	root := filepath.Join("..", "..")
	for readme, pkgs := range readmes {
		snippets := goBlocks(t, filepath.Join(root, readme))
		if len(snippets) == 0 {
			t.Errorf("%s: no Go snippet", readme)
		}
		var examples [][]string
		for _, pkg := range pkgs {
			examples = append(examples, exampleLines(t, filepath.Join(root, pkg))...)
		}
		for i, s := range snippets {
			if !inOrderInAny(s, examples) {
				t.Errorf("%s: snippet %d is in no Example of %s, in order:\n%s", readme, i+1, strings.Join(pkgs, " or "), strings.Join(s, "\n"))
			}
		}
	}
}

// placeholders are the one-line error checks that snippets abbreviate and
// Examples spell out.
var placeholders = map[string]bool{"if err != nil { ... }": true, "if err != nil { return err }": true}

// goBlocks returns the lines of each ```go block of path, and the new side
// of each ```diff block (its added and kept lines).
func goBlocks(t *testing.T, path string) [][]string {
	t.Helper()
	var blocks [][]string
	var cur []string
	in, diff := false, false
	for _, raw := range readLines(t, path) {
		line := normalize(raw) // a block may be indented, in a list
		if in && diff && !strings.HasPrefix(line, "```") {
			if strings.HasPrefix(raw, "-") {
				continue // the old side
			}
			line = normalize(strings.TrimPrefix(strings.TrimPrefix(raw, "+"), " "))
		}
		switch {
		case !in && (line == "```go" || line == "```diff"):
			in, diff, cur = true, line == "```diff", nil
		case in && strings.HasPrefix(line, "```"):
			in = false
			blocks = append(blocks, cur)
		case in && line != "" && !placeholders[line]:
			cur = append(cur, line)
		}
	}
	return blocks
}

// exampleLines returns the lines of each func Example… of the
// readme_example_test.go of dir, normalized.
func exampleLines(t *testing.T, dir string) [][]string {
	t.Helper()
	var funcs [][]string
	var imports []string
	inImports, inFunc := false, false
	for _, line := range readLines(t, filepath.Join(dir, "readme_example_test.go")) {
		switch {
		case line == "import (":
			inImports, imports = true, []string{line}
		case inImports:
			imports = append(imports, normalize(line))
			inImports = line != ")"
		case strings.HasPrefix(line, "func Example"):
			inFunc = true
			funcs = append(funcs, append([]string{}, imports...)) // a snippet may show its imports
		case inFunc && line == "}": // unindented: the function's end
			inFunc = false
		case inFunc && line != "":
			funcs[len(funcs)-1] = append(funcs[len(funcs)-1], normalize(line))
		}
	}
	return funcs
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// normalize trims a line and writes each run of blanks as one space.
func normalize(line string) string { return strings.Join(strings.Fields(line), " ") }

// inOrderInAny reports whether the lines of s appear, in order, in one of
// funcs.
func inOrderInAny(s []string, funcs [][]string) bool {
	for _, f := range funcs {
		i := 0
		for _, line := range f {
			if i < len(s) && line == s[i] {
				i++
			}
		}
		if i == len(s) {
			return true
		}
	}
	return false
}
