package lock_test

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/etcdlock/etcdlock/pkg/holders"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// randomName draws names from the bytes that matter to the escaping.
func randomName(rng *rand.Rand) string {
	const alphabet = "a/%2F5f"
	b := make([]byte, 1+rng.IntN(6))
	for i := range b {
		b[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return string(b)
}

// No name's key range contains another's, and escaping is one to one;
// names without '/' and '%' are their own key segment.
func TestNamePrefixesNeverNest(t *testing.T) {
	t.Parallel()
	nests := func(prefixOf func(string) string) (a, b string, found bool) {
		rng := rand.New(rand.NewPCG(1, 2))
		for range 20000 {
			a, b := randomName(rng), randomName(rng)
			if a != b && strings.HasPrefix(prefixOf(a), prefixOf(b)) {
				return a, b, true
			}
		}
		return "", "", false
	}
	prefixOf := func(n string) string { return namePrefix(t, "/p/", n) }
	if a, b, found := nests(prefixOf); found {
		t.Errorf("the key prefix of %q, %q, lies under that of %q, %q", a, prefixOf(a), b, prefixOf(b))
	}
	// Negative control: the same check finds nesting in unescaped names.
	if _, _, found := nests(func(n string) string { return "/p/" + n + "/" }); !found {
		t.Error("the check found no nesting among unescaped names: it cannot fail")
	}
	for name, want := range map[string]string{
		"nightly":      "/p/nightly/",
		"jobs/nightly": "/p/jobs%2Fnightly/",
		"100%":         "/p/100%25/",
		"a%2Fb":        "/p/a%252Fb/",
		"/":            "/p/%2F/",
	} {
		if got := namePrefix(t, "/p/", name); got != want {
			t.Errorf("key prefix of %q = %q, want %q", name, got, want)
		}
	}
}

// holders.Inspect rejects what the entry points reject: a prefix WithPrefix
// refuses (it used to build "/locksa/" from "/locks" and "a") and a name
// ValidateName refuses.
func TestPrefixAndNameAreChecked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		prefix, name string
		want         error
	}{
		{"/locks", "a", lock.ErrInvalidOption},
		{"", "a", lock.ErrInvalidOption},
		{"/locks/", "", lock.ErrInvalidName},
		{"/locks/", "a\x00b", lock.ErrInvalidName},
	} {
		if _, err := holders.Inspect(testCtx(t), client(t), tc.prefix, tc.name); !errors.Is(err, tc.want) {
			t.Errorf("Inspect(%q, %q) = %v; want %v", tc.prefix, tc.name, err, tc.want)
		}
	}
}

// Names that nest as paths, or that look like another's escaped form, are
// separate locks, and List and Inspect give them back as written.
func TestNamesWithSlashesAreSeparateLocks(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	a, b := newSession(t, cli, lock.WithOwner("a")), newSession(t, cli)
	names := []string{"jobs", "jobs/nightly", "jobs%2Fnightly", "jobs/", "/", "jobs/nightly/x"}
	for _, n := range names {
		if _, err := a.TryAcquire(ctx, n); err != nil {
			t.Fatalf("TryAcquire(%q) with the others held: %v", n, err)
		}
	}
	for _, n := range names {
		var locked *lock.LockedError
		if _, err := b.TryAcquire(ctx, n); !errors.As(err, &locked) || locked.Name != n || locked.Owner != "a" {
			t.Errorf("second session's TryAcquire(%q) = %v, want held by the first", n, err)
		}
		st, err := holders.Inspect(ctx, cli, prefix(t), n)
		if err != nil || st.Holder == nil || len(st.Waiters) != 0 {
			t.Errorf("Inspect(%q) = %+v, %v: want one holder, no waiter", n, st, err)
		}
	}
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"", []string{"/", "jobs", "jobs%2Fnightly", "jobs/", "jobs/nightly", "jobs/nightly/x"}},
		{"jobs/", []string{"jobs/", "jobs/nightly", "jobs/nightly/x"}},
		{"jobs%", []string{"jobs%2Fnightly"}},
	} {
		sts, err := holders.List(ctx, cli, prefix(t), tc.prefix)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, st := range sts {
			got = append(got, st.Name)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("List(%q) = %q, want %q", tc.prefix, got, tc.want)
		}
	}
}

// etcd's own lock clients (concurrency.Mutex, which etcdctl lock uses) and
// etcdlock exclude each other on a name without '/' or '%', both ways.
func TestInteroperatesWithConcurrencyMutex(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	s := newSession(t, cli)
	es, err := concurrency.NewSession(cli, concurrency.WithTTL(5))
	if err != nil {
		t.Fatal(err)
	}
	defer es.Close()
	m := concurrency.NewMutex(es, prefix(t)+"shared")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	var locked *lock.LockedError
	if _, err := s.TryAcquire(ctx, "shared"); !errors.As(err, &locked) {
		t.Fatalf("TryAcquire while concurrency.Mutex holds the name = %v, want *LockedError", err)
	}
	if !locked.Foreign || locked.LeaseID != es.Lease() || locked.Owner != "" || !strings.Contains(locked.Error(), "etcdctl lock") {
		t.Errorf("LockedError %+v (%v): want a foreign holder with the Mutex's lease %x", locked, locked, int64(es.Lease()))
	}
	st, err := holders.Inspect(ctx, cli, prefix(t), "shared")
	if err != nil || st.Holder == nil || !st.Holder.Foreign || st.Holder.LeaseID != es.Lease() {
		t.Errorf("Inspect = %+v, %v: want the Mutex's key as a foreign holder", st, err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := s.TryAcquire(ctx, "shared")
	if err != nil {
		t.Fatalf("TryAcquire after the Mutex unlocked: %v", err)
	}
	if st, err := holders.Inspect(ctx, cli, prefix(t), "shared"); err != nil || st.Holder == nil || st.Holder.Foreign {
		t.Errorf("Inspect = %+v, %v: etcdlock's own key reads as foreign", st, err)
	}
	if err := concurrency.NewMutex(es, prefix(t)+"shared").TryLock(ctx); !errors.Is(err, concurrency.ErrLocked) {
		t.Errorf("Mutex.TryLock while etcdlock holds the name = %v, want ErrLocked", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
