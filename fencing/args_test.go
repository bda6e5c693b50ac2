package fencing_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/etcdlock/etcdlock/fencing"
)

// Bad arguments are refused with ErrInvalidArgument and admit nothing: a
// nil Guard, an empty resource, a nil write (which used to panic after
// raising the mark).
func TestGuardRefusesBadArguments(t *testing.T) {
	var g fencing.Guard
	var nilGuard *fencing.Guard
	for what, err := range map[string]error{
		"nil write":      g.Do("r", 9, nil),
		"empty resource": g.Do("", 9, func() error { return nil }),
		"nil guard":      nilGuard.Do("r", 9, func() error { return nil }),
	} {
		if !errors.Is(err, fencing.ErrInvalidArgument) {
			t.Errorf("%s: Do = %v, want ErrInvalidArgument", what, err)
		}
	}
	if _, err := g.Reset("", 1); !errors.Is(err, fencing.ErrInvalidArgument) {
		t.Errorf("Reset of an empty resource = %v", err)
	}
	if _, err := nilGuard.Reset("r", 1); !errors.Is(err, fencing.ErrInvalidArgument) {
		t.Errorf("Reset on a nil Guard = %v", err)
	}
	if got := nilGuard.Current("r"); got != 0 {
		t.Errorf("Current on a nil Guard = %v", got)
	}
	if got := g.Current("r"); got != 0 {
		t.Errorf("a refused Do raised the mark to %v", got)
	}
}

// A zero Token (no token) survives a JSON round trip.
func TestZeroTokenRoundTrip(t *testing.T) {
	type doc struct{ T fencing.Token }
	for _, in := range []doc{{0}, {7}} {
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		var out doc
		if err := json.Unmarshal(b, &out); err != nil || out != in {
			t.Errorf("%s read back as %v, %v", b, out, err)
		}
	}
}
