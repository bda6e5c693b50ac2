package main

import (
	"testing"
	"time"
)

func TestSecondsFlag(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"10", 10 * time.Second, true},
		{"0.5", 500 * time.Millisecond, true},
		{"0", 0, true},
		{"2m", 2 * time.Minute, true},
		{"1h30m", 90 * time.Minute, true},
		{"1e300", 0, false},
		{"soon", 0, false},
		{"", 0, false},
	} {
		var d time.Duration
		err := (*seconds)(&d).Set(tt.in)
		if (err == nil) != tt.ok || tt.ok && d != tt.want {
			t.Errorf("Set(%q) = %v, %v; want %v (ok %v)", tt.in, d, err, tt.want, tt.ok)
		}
	}
}
