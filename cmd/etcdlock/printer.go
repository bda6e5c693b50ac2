package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/etcdlock/etcdlock/cmd/internal/exitcode"
)

// printer writes command results and errors in the chosen format: simple
// (lines for people and shells) or json (one object per line).
type printer struct {
	format      string
	quiet       bool // --quiet: no notes
	out, errOut io.Writer
	outErr      error // the first failed write to out
}

// Print writes v: as JSON, or with simple, its own text. It returns the
// first write to out that failed, in this call or an earlier one (stdout
// full, or its reader gone): what was written may be incomplete, and
// nothing more is written.
func (p *printer) Print(v any, simple func(w io.Writer)) error {
	if p.outErr != nil {
		return p.outErr
	}
	w := &failedWrite{w: p.out}
	if p.format == "json" {
		_ = json.NewEncoder(w).Encode(v)
	} else {
		simple(w)
	}
	if w.err != nil {
		// Exit 1, not the configuration error a *fs.PathError means
		// elsewhere (an unreadable TLS file).
		p.outErr = withCode(exitcode.Error, fmt.Errorf("write the result to stdout: %w", w.err))
	}
	return p.outErr
}

// failedWrite is w that keeps its first error and writes nothing after it.
type failedWrite struct {
	w   io.Writer
	err error
}

func (f *failedWrite) Write(b []byte) (int, error) {
	if f.err != nil {
		return 0, f.err
	}
	n, err := f.w.Write(b)
	f.err = err
	return n, err
}

// Note writes a progress message to stderr (JSON with -w json).
func (p *printer) Note(format string, args ...any) {
	if p.quiet {
		return
	}
	msg := fmt.Sprintf(format, args...)
	if p.format == "json" {
		_ = json.NewEncoder(p.errOut).Encode(map[string]string{"note": msg})
		return
	}
	fmt.Fprintln(p.errOut, "etcdlock:", msg)
}

// Error writes an error's message as one line on stderr (a JSON object
// with its exit code with -w json).
func (p *printer) Error(msg string, code int) {
	if p.format == "json" {
		_ = json.NewEncoder(p.errOut).Encode(map[string]any{"error": msg, "exit_code": code})
		return
	}
	fmt.Fprintln(p.errOut, "etcdlock: error:", msg)
}
