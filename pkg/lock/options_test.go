package lock_test

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/clock"
	"github.com/etcdlock/etcdlock/pkg/detached"
	"github.com/etcdlock/etcdlock/pkg/holders"
	"github.com/etcdlock/etcdlock/pkg/internal/keyspace"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// optionInterfaces are the option types of the entry points, by name.
var optionInterfaces = map[string]reflect.Type{
	"SessionOption":  reflect.TypeFor[lock.SessionOption](),
	"DetachedOption": reflect.TypeFor[lock.DetachedOption](),
	"AcquireOption":  reflect.TypeFor[lock.AcquireOption](),
}

// Every option constructor returns a type that implements exactly the
// option interfaces its doc comment names, so that it compiles where the
// doc says it applies and nowhere else; and every constructor of the
// package is in the table.
func TestOptionTypesMatchTheirDocs(t *testing.T) {
	t.Parallel()
	made := map[string]any{
		"WithTTL":            lock.WithTTL(5 * time.Second),
		"WithOwner":          lock.WithOwner("o"),
		"WithLogger":         lock.WithLogger(zap.NewNop()),
		"WithPrefix":         lock.WithPrefix("/p/"),
		"WithSafetyMargin":   lock.WithSafetyMargin(time.Second),
		"WithRenewInterval":  lock.WithRenewInterval(time.Second),
		"WithClock":          lock.WithClock(clock.Real()),
		"WithCleanupTimeout": lock.WithCleanupTimeout(time.Second),
		"WithMetrics":        lock.WithMetrics(nil),
		"WithLockDelay":      lock.WithLockDelay(time.Second),
		"WithLimit":          lock.WithLimit(2),
		"WithShared":         lock.WithShared(),
		"WithWaitHook":       lock.WithWaitHook(func() {}),
	}
	docs := constructorDocs(t)
	for name := range docs {
		if _, ok := made[name]; !ok {
			t.Errorf("%s is missing from the table", name)
		}
	}
	for name, o := range made {
		t.Run(name, func(t *testing.T) {
			doc, ok := docs[name]
			if !ok {
				t.Fatalf("no function %s with a doc comment in the package", name)
			}
			named := 0
			for iname, it := range optionInterfaces {
				want := regexp.MustCompile(`\b` + iname + `\b`).MatchString(doc)
				if want {
					named++
				}
				if got := reflect.TypeOf(o).Implements(it); got != want {
					t.Errorf("%s's %T implements %s: %v, its doc says %v", name, o, iname, got, want)
				}
			}
			if named == 0 {
				t.Errorf("%s's doc names no option interface", name)
			}
		})
	}
}

// constructorDocs returns the doc comment of every exported function of
// the package whose name starts with "With", by name.
func constructorDocs(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if ok && fd.Recv == nil && strings.HasPrefix(fd.Name.Name, "With") && fd.Doc != nil {
				docs[fd.Name.Name] = fd.Doc.Text()
			}
		}
	}
	return docs
}

// Every entry point rejects a nil option with ErrInvalidOption before it
// contacts etcd, as it rejects a value out of range.
func TestNilOptionIsRejected(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	s := newSession(t, cli)
	for name, call := range map[string]func() error{
		"NewSession":             func() error { _, err := lock.NewSession(ctx, cli, nil); return err },
		"ValidateSessionOptions": func() error { return lock.ValidateSessionOptions(nil) },
		"detached.New":           func() error { _, err := detached.New(cli, nil); return err },
		"Acquire":                func() error { _, err := s.Acquire(ctx, "n", nil); return err },
		"TryAcquire":             func() error { _, err := s.TryAcquire(ctx, "n", nil); return err },
		"AcquireAll":             func() error { _, err := s.AcquireAll(ctx, []string{"n"}, nil); return err },
		"ValidateAcquireOptions": func() error { return lock.ValidateAcquireOptions(nil) },
	} {
		if err := call(); !errors.Is(err, lock.ErrInvalidOption) {
			t.Errorf("%s(nil option) = %v, want ErrInvalidOption", name, err)
		}
	}
}

// ValidateAcquireOptions returns what Acquire returns for the same options
// on a session without defaults: values out of range and options that
// cannot be combined fail, the rest pass.
func TestValidateAcquireOptions(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		opts []lock.AcquireOption
		ok   bool
	}{
		"none":                       {nil, true},
		"limit":                      {[]lock.AcquireOption{lock.WithLimit(maxLimit)}, true},
		"limit 0":                    {[]lock.AcquireOption{lock.WithLimit(0)}, false},
		"limit above the maximum":    {[]lock.AcquireOption{lock.WithLimit(maxLimit + 1)}, false},
		"shared":                     {[]lock.AcquireOption{lock.WithShared()}, true},
		"lock-delay":                 {[]lock.AcquireOption{lock.WithLockDelay(maxLockDelay)}, true},
		"negative lock-delay":        {[]lock.AcquireOption{lock.WithLockDelay(-time.Second)}, false},
		"lock-delay above max":       {[]lock.AcquireOption{lock.WithLockDelay(maxLockDelay + time.Second)}, false},
		"limit and shared":           {[]lock.AcquireOption{lock.WithLimit(2), lock.WithShared()}, false},
		"limit 1 and shared":         {[]lock.AcquireOption{lock.WithLimit(1), lock.WithShared()}, true},
		"lock-delay and limit":       {[]lock.AcquireOption{lock.WithLockDelay(time.Second), lock.WithLimit(2)}, false},
		"lock-delay and shared":      {[]lock.AcquireOption{lock.WithShared(), lock.WithLockDelay(time.Second)}, false},
		"lock-delay 0 and shared":    {[]lock.AcquireOption{lock.WithLockDelay(0), lock.WithShared()}, true},
		"later lock-delay turns off": {[]lock.AcquireOption{lock.WithLockDelay(time.Second), lock.WithLimit(2), lock.WithLockDelay(0)}, true},
	} {
		err := lock.ValidateAcquireOptions(tc.opts...)
		if tc.ok && err != nil {
			t.Errorf("%s: ValidateAcquireOptions = %v, want nil", name, err)
		}
		if !tc.ok && !errors.Is(err, lock.ErrInvalidOption) {
			t.Errorf("%s: ValidateAcquireOptions = %v, want ErrInvalidOption", name, err)
		}
	}
}

// Of two options that set the same thing, the later one sets it.
func TestLaterOptionWins(t *testing.T) {
	t.Parallel()
	s := newSession(t, client(t), lock.WithOwner("first"), lock.WithOwner("second"))
	l, err := s.Acquire(testCtx(t), "n")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client(t).Get(testCtx(t), l.Key())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("Get(%s) = %v, %v", l.Key(), resp, err)
	}
	if got := keyspace.Owner(resp.Kvs[0].Value); got != "second" {
		t.Errorf("owner = %q, want the later WithOwner's %q", got, "second")
	}
}

// Every entry point that takes a client rejects a nil one with
// ErrInvalidOption instead of panicking on it.
func TestNilClientIsRejected(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	for name, call := range map[string]func() error{
		"NewSession":      func() error { _, err := lock.NewSession(ctx, nil); return err },
		"detached.New":    func() error { _, err := detached.New(nil); return err },
		"holders.Inspect": func() error { _, err := holders.Inspect(ctx, nil, "/p/", "n"); return err },
		"holders.List":    func() error { _, err := holders.List(ctx, nil, "/p/", ""); return err },
		"holders.Break": func() error {
			_, _, err := holders.Break(ctx, nil, "/p/", "n", fencing.Token(1), 0)
			return err
		},
		"holders.Force": func() error { _, err := holders.Force(ctx, nil, "/p/", "n", fencing.Token(1)); return err },
		"holders.Follow": func() error {
			return holders.Follow(ctx, nil, "/p/", "n", func(holders.Status) bool { return false })
		},
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
	for name, opts := range map[string][]lock.SessionOption{
		"margin equal to the TTL":        {lock.WithTTL(2 * time.Second), lock.WithSafetyMargin(2 * time.Second)},
		"margin above the default TTL":   {lock.WithSafetyMargin(11 * time.Second)},
		"margin above a TTL given after": {lock.WithSafetyMargin(3 * time.Second), lock.WithTTL(2 * time.Second)},
	} {
		if err := lock.ValidateSessionOptions(opts...); !errors.Is(err, lock.ErrInvalidOption) {
			t.Errorf("%s: ValidateSessionOptions = %v, want ErrInvalidOption", name, err)
		}
	}
}
