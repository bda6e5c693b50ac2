package lock_test

import (
	"errors"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/clock"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// Every entry point that takes options accepts the ones its doc names and
// rejects every other one with ErrInvalidOption, before contacting etcd:
// an option is honoured or refused, never ignored.
func TestOptionsApplyOrAreRejected(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	all := map[string]lock.Option{
		"WithTTL":            lock.WithTTL(5 * time.Second),
		"WithOwner":          lock.WithOwner("o"),
		"WithLogger":         lock.WithLogger(zap.NewNop()),
		"WithPrefix":         lock.WithPrefix(prefix(t)),
		"WithSafetyMargin":   lock.WithSafetyMargin(time.Second),
		"WithRenewInterval":  lock.WithRenewInterval(time.Second),
		"WithClock":          lock.WithClock(clock.Real()),
		"WithCleanupTimeout": lock.WithCleanupTimeout(time.Second),
		"WithRenewHook":      lock.WithRenewHook(func(time.Duration, error) {}),
	}
	entries := []struct {
		name    string
		accepts []string
		call    func(lock.Option) error
	}{
		{"NewSession", []string{"WithTTL", "WithOwner", "WithLogger", "WithPrefix", "WithSafetyMargin", "WithRenewInterval", "WithClock", "WithCleanupTimeout", "WithRenewHook"},
			func(o lock.Option) error { return lock.ValidateSessionOptions(o) }},
		{"NewDetached", []string{"WithPrefix", "WithSafetyMargin", "WithClock", "WithCleanupTimeout"},
			func(o lock.Option) error { _, err := lock.NewDetached(cli, o); return err }},
		{"Inspect", []string{"WithPrefix"},
			func(o lock.Option) error { _, err := lock.Inspect(ctx, cli, "n", o); return err }},
		{"List", []string{"WithPrefix"},
			func(o lock.Option) error { _, err := lock.List(ctx, cli, "", o); return err }},
		{"Follow", []string{"WithPrefix"},
			func(o lock.Option) error {
				return lock.Follow(ctx, cli, "n", func(lock.Status) bool { return false }, o)
			}},
		{"ValidateReadOptions", []string{"WithPrefix"},
			func(o lock.Option) error { return lock.ValidateReadOptions(o) }},
		{"Break", []string{"WithPrefix", "WithCleanupTimeout"},
			func(o lock.Option) error {
				_, err := lock.Break(ctx, cli, "n", fencing.Token(1), o)
				if errors.Is(err, lock.ErrNotHeld) {
					return nil // the option was taken; nothing to break
				}
				return err
			}},
	}
	for _, e := range entries {
		t.Run(e.name, func(t *testing.T) {
			accepted := map[string]bool{}
			for _, n := range e.accepts {
				accepted[n] = true
			}
			for name, o := range all {
				err := e.call(o)
				switch {
				case accepted[name] && err != nil:
					t.Errorf("%s(%s) = %v, want it accepted", e.name, name, err)
				case !accepted[name] && !errors.Is(err, lock.ErrInvalidOption):
					t.Errorf("%s(%s) = %v, want ErrInvalidOption", e.name, name, err)
				}
			}
			if err := e.call(nil); !errors.Is(err, lock.ErrInvalidOption) {
				t.Errorf("%s(nil option) = %v, want ErrInvalidOption", e.name, err)
			}
		})
	}
}

// Every entry point that takes a client rejects a nil one with
// ErrInvalidOption instead of panicking on it.
func TestNilClientIsRejected(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	for name, call := range map[string]func() error{
		"NewSession":  func() error { _, err := lock.NewSession(ctx, nil); return err },
		"NewDetached": func() error { _, err := lock.NewDetached(nil); return err },
		"Inspect":     func() error { _, err := lock.Inspect(ctx, nil, "n"); return err },
		"List":        func() error { _, err := lock.List(ctx, nil, ""); return err },
		"Break":       func() error { _, err := lock.Break(ctx, nil, "n", fencing.Token(1)); return err },
		"Follow":      func() error { return lock.Follow(ctx, nil, "n", func(lock.Status) bool { return false }) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s(nil client) panicked: %v", name, r)
				}
			}()
			if err := call(); !errors.Is(err, lock.ErrInvalidOption) {
				t.Errorf("%s(nil client) = %v, want ErrInvalidOption", name, err)
			}
		})
	}
}

// A session's safety margin must be below its TTL, the default one
// included: NewSession rejects it before etcd is contacted.
func TestSessionMarginBelowTTL(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string][]lock.Option{
		"margin equal to the TTL":        {lock.WithTTL(2 * time.Second), lock.WithSafetyMargin(2 * time.Second)},
		"margin above the default TTL":   {lock.WithSafetyMargin(lock.DefaultTTL + time.Second)},
		"margin above a TTL given after": {lock.WithSafetyMargin(3 * time.Second), lock.WithTTL(2 * time.Second)},
	} {
		if err := lock.ValidateSessionOptions(opts...); !errors.Is(err, lock.ErrInvalidOption) {
			t.Errorf("%s: ValidateSessionOptions = %v, want ErrInvalidOption", name, err)
		}
	}
}

// OptionName names the function that made an option, whatever its value,
// so that two sources of options can be checked for overlap.
func TestOptionName(t *testing.T) {
	t.Parallel()
	for want, o := range map[string]lock.Option{
		"WithTTL":       lock.WithTTL(time.Hour),
		"WithPrefix":    lock.WithPrefix("no-slash"), // out of range
		"WithRenewHook": lock.WithRenewHook(nil),
		"":              nil,
	} {
		if got := lock.OptionName(o); got != want {
			t.Errorf("OptionName = %q, want %q", got, want)
		}
	}
}
