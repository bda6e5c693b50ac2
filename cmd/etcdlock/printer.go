package main

import (
	"encoding/json"
	"fmt"
	"io"
)

// printer writes command results and errors in the chosen format: simple
// (lines for people and shells) or json (one object per line).
type printer struct {
	format      string
	quiet       bool // --quiet: no notes
	out, errOut io.Writer
}

// Print writes v: as JSON, or with simple, its own text.
func (p *printer) Print(v any, simple func(w io.Writer)) {
	if p.format == "json" {
		_ = json.NewEncoder(p.out).Encode(v)
		return
	}
	simple(p.out)
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
