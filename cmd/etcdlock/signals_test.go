//go:build !windows

package main

import (
	"strings"
	"syscall"
	"testing"

	"github.com/etcdlock/etcdlock/cmd/internal/exitcode"
)

func TestParseSignal(t *testing.T) {
	tests := []struct {
		in   string
		want syscall.Signal // 0: a usage error
	}{
		{"TERM", syscall.SIGTERM},
		{"SIGTERM", syscall.SIGTERM},
		{"term", syscall.SIGTERM},
		{"sigkill", syscall.SIGKILL},
		{"HUP", syscall.SIGHUP},
		{"15", syscall.SIGTERM},
		{"9", syscall.SIGKILL},
		{"64", syscall.Signal(64)},
		{"0", 0},
		{"65", 0},
		{"-15", 0},
		{"bogus", 0},
		{"SIG", 0},
		{"", 0},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseSignal(tt.in)
			if tt.want == 0 {
				if err == nil || exitCode(err) != exitcode.Usage || !strings.Contains(err.Error(), "unknown signal") {
					t.Fatalf("parseSignal(%q) = %v, %v; want a usage error", tt.in, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("parseSignal(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}
