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
	format string
	quiet  bool         // --quiet: no notes
	out    *failedWrite // stdout, for cobra's own output (help, completion scripts) too
	errOut io.Writer
	// writeErr is notWritten's error, made once, so that execute can
	// tell it from an error a command made of it.
	writeErr error
}

// Print writes v: as JSON, or with simple, its own text. It returns
// notWritten: once a write to stdout failed (stdout full, or its reader
// gone), what was written may be incomplete, and nothing more is written.
func (p *printer) Print(v any, simple func(w io.Writer)) error {
	if p.out.err == nil {
		if p.format == "json" {
			_ = json.NewEncoder(p.out).Encode(v)
		} else {
			simple(p.out)
		}
	}
	return p.notWritten()
}

// notWritten is the error of the first write to stdout that failed, by
// Print or by cobra, or nil. Exit 1, not the configuration error a
// *fs.PathError means elsewhere (an unreadable TLS file).
func (p *printer) notWritten() error {
	if p.out.err == nil {
		return nil
	}
	if p.writeErr == nil {
		p.writeErr = withCode(exitcode.Error, fmt.Errorf("write the result to stdout: %w", p.out.err))
	}
	return p.writeErr
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
