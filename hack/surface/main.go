// Command surface prints how large and how readable pkg/lock is, beside
// etcd's client/v3/concurrency, the anchor of its design: the exported
// identifiers and `go doc -short` lines of each, their exported doc
// comments' length, the files and functions one contended Acquire of a
// plain lock runs through (measured by coverage, beside Mutex.Lock's), the
// checks of a lock's kind outside the kinds' own files, the Session type's
// size, and the longest function of cmd/.
//
//	go run ./hack/surface    (from the repository's root; make surface)
//	go run ./hack/surface -path    (also lists the functions of that path)
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

const (
	lockDir   = "pkg/lock"
	anchorPkg = "go.etcd.io/etcd/client/v3/concurrency"
)

func main() {
	listPath := flag.Bool("path", false, "list the functions one contended Acquire of a plain lock runs, and Mutex.Lock's")
	flag.Parse()
	if err := run(*listPath); err != nil {
		fmt.Fprintln(os.Stderr, "surface:", err)
		os.Exit(1)
	}
}

func run(listPath bool) error {
	anchorDir, err := goList(anchorPkg)
	if err != nil {
		return err
	}
	ours, err := parseDir(lockDir)
	if err != nil {
		return err
	}
	theirs, err := parseDir(anchorDir)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "\tpkg/lock\tconcurrency\n")
	fmt.Fprintf(w, "exported identifiers (names, methods)\t%d\t%d\n", exported(ours), exported(theirs))
	fmt.Fprintf(w, "go doc -short lines\t%d\t%d\n", docLines("./"+lockDir), docLines(anchorPkg))
	mo, xo := docStats(ours)
	mt, xt := docStats(theirs)
	fmt.Fprintf(w, "exported doc comments: mean lines, longest\t%.1f, %d\t%.1f, %d\n", mo, xo, mt, xt)
	path, err := contendedPath(anchorDir, listPath)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "one contended lock: files / functions run\t%s\t%s\n", path[0], path[1])
	fmt.Fprintf(w, "kind checks outside the kinds' files\t%s\t\n", kindChecks(ours))
	fmt.Fprintf(w, "Session: fields; methods taking a *Lock\t%s\t%s\n", sessionSize(ours, "Session"), sessionSize(theirs, "Session"))
	cmdFn, err := longestFunc("cmd")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "cmd/: longest function; most parameters\t%s\t\n", cmdFn)
	return w.Flush()
}

// pkgFiles is a package's non-test files, parsed with comments.
type pkgFiles struct {
	dir   string
	fset  *token.FileSet
	files map[string]*ast.File // by base name
}

func parseDir(dir string) (pkgFiles, error) {
	p := pkgFiles{dir: dir, fset: token.NewFileSet(), files: map[string]*ast.File{}}
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return p, err
	}
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(p.fset, n, nil, parser.ParseComments)
		if err != nil {
			return p, err
		}
		p.files[filepath.Base(n)] = f
	}
	return p, nil
}

// doc is the package's documentation, made from a fresh parse: go/doc
// edits the syntax trees it is given.
func (p pkgFiles) doc() *doc.Package {
	fresh, err := parseDir(p.dir)
	if err != nil {
		panic(err) // parsed once already
	}
	files := make([]*ast.File, 0, len(fresh.files))
	for _, f := range fresh.files {
		files = append(files, f)
	}
	d, _ := doc.NewFromFiles(fresh.fset, files, "x")
	return d
}

// exported counts the exported top-level names and the exported methods
// of exported types.
func exported(p pkgFiles) int {
	d := p.doc()
	n := len(d.Funcs)
	for _, v := range append(d.Consts, d.Vars...) {
		n += len(v.Names)
	}
	for _, t := range d.Types {
		n += 1 + len(t.Funcs) + len(t.Methods)
		for _, v := range append(t.Consts, t.Vars...) {
			n += len(v.Names)
		}
	}
	return n
}

// docStats is the mean and longest doc comment, in lines, of the exported
// declarations.
func docStats(p pkgFiles) (float64, int) {
	d := p.doc()
	var lines []int
	add := func(s string) {
		if s != "" {
			lines = append(lines, strings.Count(strings.TrimSpace(s), "\n")+1)
		}
	}
	for _, f := range d.Funcs {
		add(f.Doc)
	}
	for _, v := range append(d.Consts, d.Vars...) {
		add(v.Doc)
	}
	for _, t := range d.Types {
		add(t.Doc)
		for _, f := range append(t.Funcs, t.Methods...) {
			add(f.Doc)
		}
		for _, v := range append(t.Consts, t.Vars...) {
			add(v.Doc)
		}
	}
	if len(lines) == 0 {
		return 0, 0
	}
	sum := 0
	for _, l := range lines {
		sum += l
	}
	return float64(sum) / float64(len(lines)), slices.Max(lines)
}

func docLines(pkg string) int {
	out, err := exec.Command("go", "doc", "-short", pkg).Output()
	if err != nil {
		return -1
	}
	return bytes.Count(out, []byte("\n"))
}

func goList(pkg string) (string, error) {
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", pkg).Output()
	if err != nil {
		return "", fmt.Errorf("go list %s: %w", pkg, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// contendedPath runs TestContendedAcquirePath with coverage, for a lock
// and for concurrency.Mutex, with and without the contended acquisition,
// and returns "files / functions" for each: those with a statement the
// acquisition ran more often than the run without it. The test ends the
// process as the acquisition returns, so that neither run's clean-up is
// counted: the test binary is built once and run directly, with
// GOCOVERDIR, and its counters turned into profiles by go tool covdata.
func contendedPath(anchorDir string, list bool) ([2]string, error) {
	tmp, err := os.MkdirTemp("", "surface")
	if err != nil {
		return [2]string{}, err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "lock.test")
	build := exec.Command("go", "test", "-c", "-o", bin, "-tags", "surface", "-covermode=atomic",
		"-coverpkg=./"+lockDir+","+anchorPkg, "./"+lockDir)
	if out, err := build.CombinedOutput(); err != nil {
		return [2]string{}, fmt.Errorf("%v: %v\n%s", build.Args, err, out)
	}
	var res [2]string
	for i, run := range []struct{ name, dir string }{{"lock", lockDir}, {"mutex", anchorDir}} {
		var profiles [2]string
		for j, base := range []string{"1", ""} {
			covdir := filepath.Join(tmp, run.name+base)
			if err := os.Mkdir(covdir, 0o755); err != nil {
				return res, err
			}
			cmd := exec.Command(bin, "-test.count=1", "-test.run", "^TestContendedAcquirePath$")
			cmd.Dir = lockDir
			// TMPDIR: the embedded etcd's files, which the ended process
			// leaves, go with tmp.
			cmd.Env = append(os.Environ(), "ETCDLOCK_PATH="+run.name, "ETCDLOCK_PATH_BASE="+base, "GOCOVERDIR="+covdir, "TMPDIR="+tmp)
			if out, err := cmd.CombinedOutput(); err != nil {
				return res, fmt.Errorf("%v: %v\n%s", cmd.Args, err, out)
			}
			profiles[j] = covdir + ".out"
			conv := exec.Command("go", "tool", "covdata", "textfmt", "-i="+covdir, "-o="+profiles[j])
			if out, err := conv.CombinedOutput(); err != nil {
				return res, fmt.Errorf("%v: %v\n%s", conv.Args, err, out)
			}
		}
		files, funcs, err := covered(profiles[0], profiles[1], run.dir)
		if err != nil {
			return res, err
		}
		if list {
			fmt.Printf("%s: %s\n", run.name, strings.Join(funcs, " "))
		}
		res[i] = fmt.Sprintf("%d / %d", files, len(funcs))
	}
	return res, nil
}

// covered counts the files and functions of dir with a statement that
// ran more often in the coverage profile full than in base.
func covered(base, full, dir string) (files int, funcs []string, err error) {
	counts := func(path string) (map[string]int, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		m := map[string]int{}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			// path/name.go:12.3,14.2 2 1
			f := strings.Fields(sc.Text())
			if len(f) == 3 {
				n, _ := strconv.Atoi(f[2])
				m[f[0]] += n
			}
		}
		return m, nil
	}
	before, err := counts(base)
	if err != nil {
		return 0, nil, err
	}
	after, err := counts(full)
	if err != nil {
		return 0, nil, err
	}
	type pos struct {
		file string
		line int
	}
	var hits []pos
	for block, n := range after {
		if n <= before[block] {
			continue
		}
		colon := strings.LastIndex(block, ":")
		start, _ := strconv.Atoi(strings.SplitN(block[colon+1:], ".", 2)[0])
		hits = append(hits, pos{filepath.Base(block[:colon]), start})
	}
	absDir, _ := filepath.Abs(dir)
	p, err := parseDir(absDir)
	if err != nil {
		return 0, nil, err
	}
	seenFile, seenFunc := map[string]bool{}, map[string]bool{}
	for _, h := range hits {
		f, ok := p.files[h.file]
		if !ok {
			continue // another package's
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			if from, to := p.fset.Position(fd.Pos()).Line, p.fset.Position(fd.End()).Line; h.line >= from && h.line <= to {
				seenFile[h.file] = true
				seenFunc[h.file+":"+funcName(fd)] = true
			}
		}
	}
	for f := range seenFunc {
		funcs = append(funcs, f)
	}
	slices.Sort(funcs)
	return len(seenFile), funcs, nil
}

// funcName is a function's name, with its receiver's type for a method
// (T.m), and its position for a function literal's enclosing one.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if star, ok := t.(*ast.StarExpr); ok {
		t = star.X
	}
	if idx, ok := t.(*ast.IndexExpr); ok {
		t = idx.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// kindFiles are the files that may look at a lock's kind: the kinds' own
// (kind.go declares the interface and chooses the kind).
var kindFiles = []string{"kind.go", "plain.go", "rwlock.go", "semaphore.go", "slot.go", "rank.go", "lockdelay.go", "multilock.go"}

// kindAccessors are the Lock methods that say which kind a lock is.
var kindAccessors = map[string]bool{"semaphore": true, "set": true, "lockDelay": true}

// kindChecks counts, outside kindFiles, type switches and assertions on a
// kind value (a Lock's kind field, or any assertion to a kind type, as
// kind.go's compile-time checks list them) and calls of the Lock methods
// that say which kind a lock is.
func kindChecks(p pkgFiles) string {
	kinds := kindTypes(p.files["kind.go"])
	n, in := 0, map[string]bool{}
	for name, f := range p.files {
		if slices.Contains(kindFiles, name) {
			continue
		}
		ast.Inspect(f, func(node ast.Node) bool {
			hit := false
			switch x := node.(type) {
			case *ast.TypeAssertExpr:
				hit = isKind(x.X) || x.Type != nil && kinds[typeName(x.Type)]
			case *ast.TypeSwitchStmt:
				hit = switchesOnKind(x, kinds)
			case *ast.CallExpr:
				if sel, ok := x.Fun.(*ast.SelectorExpr); ok && kindAccessors[sel.Sel.Name] && len(x.Args) == 0 {
					hit = true
				}
			}
			if hit {
				n++
				in[name] = true
			}
			return true
		})
	}
	return fmt.Sprintf("%d in %d files", n, len(in))
}

// kindTypes are the types that kind.go's compile-time checks
// (var _ kind = T{}) declare kinds.
func kindTypes(f *ast.File) map[string]bool {
	kinds := map[string]bool{}
	if f == nil {
		return kinds
	}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.VAR {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "kind" {
				continue
			}
			for _, v := range vs.Values {
				switch x := v.(type) {
				case *ast.CompositeLit:
					kinds[typeName(x.Type)] = true
				case *ast.CallExpr: // (*T)(nil)
					kinds[typeName(x.Fun)] = true
				}
			}
		}
	}
	return kinds
}

// switchesOnKind reports whether a type switch has a case of a kind type
// and does not switch on a Lock's kind field (which the TypeAssertExpr
// inside it counts already).
func switchesOnKind(x *ast.TypeSwitchStmt, kinds map[string]bool) bool {
	var subject ast.Expr
	switch a := x.Assign.(type) {
	case *ast.AssignStmt:
		subject = a.Rhs[0].(*ast.TypeAssertExpr).X
	case *ast.ExprStmt:
		subject = a.X.(*ast.TypeAssertExpr).X
	}
	if isKind(subject) {
		return false
	}
	for _, c := range x.Body.List {
		for _, t := range c.(*ast.CaseClause).List {
			if kinds[typeName(t)] {
				return true
			}
		}
	}
	return false
}

// typeName is T for T, *T and (*T).
func typeName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.ParenExpr:
			e = x.X
		case *ast.StarExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

func isKind(e ast.Expr) bool {
	sel, ok := e.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "kind"
}

// sessionSize is the number of fields of the struct type name and of its
// methods that take a *Lock.
func sessionSize(p pkgFiles, name string) string {
	fields, methods := 0, 0
	for _, f := range p.files {
		for _, d := range f.Decls {
			switch x := d.(type) {
			case *ast.GenDecl:
				for _, s := range x.Specs {
					if ts, ok := s.(*ast.TypeSpec); ok && ts.Name.Name == name {
						if st, ok := ts.Type.(*ast.StructType); ok {
							for _, fl := range st.Fields.List {
								fields += max(len(fl.Names), 1)
							}
						}
					}
				}
			case *ast.FuncDecl:
				if x.Recv == nil || recvName(x.Recv.List[0].Type) != name {
					continue
				}
				for _, prm := range x.Type.Params.List {
					if star, ok := prm.Type.(*ast.StarExpr); ok {
						if id, ok := star.X.(*ast.Ident); ok && id.Name == "Lock" {
							methods++
							break
						}
					}
				}
			}
		}
	}
	return fmt.Sprintf("%d; %d", fields, methods)
}

func recvName(e ast.Expr) string {
	if star, ok := e.(*ast.StarExpr); ok {
		e = star.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// longestFunc finds, in the non-test Go files under root, the longest
// function and the one with the most parameters.
func longestFunc(root string) (string, error) {
	fset := token.NewFileSet()
	var long, wide string
	longest, most := 0, 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			lines := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			params := 0
			for _, p := range fd.Type.Params.List {
				params += max(len(p.Names), 1)
			}
			if lines > longest {
				longest, long = lines, fmt.Sprintf("%s (%s)", fd.Name.Name, filepath.Base(path))
			}
			if params > most {
				most, wide = params, fmt.Sprintf("%s (%s)", fd.Name.Name, filepath.Base(path))
			}
		}
		return nil
	})
	return fmt.Sprintf("%s %d lines; %s %d", long, longest, wide, most), err
}
