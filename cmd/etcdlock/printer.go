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
	msg := fmt.Sprintf(format, args...)
	if p.format == "json" {
		_ = json.NewEncoder(p.errOut).Encode(map[string]string{"note": msg})
		return
	}
	fmt.Fprintln(p.errOut, "etcdlock:", msg)
}

// Error writes err as one line on stderr (a JSON object with -w json).
func (p *printer) Error(err error) {
	if p.format == "json" {
		_ = json.NewEncoder(p.errOut).Encode(map[string]any{"error": err.Error(), "exit_code": exitCode(err)})
		return
	}
	fmt.Fprintln(p.errOut, "etcdlock: error:", err)
}
