package lock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/pkg/holders"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

func TestAcquireAllHoldsEveryName(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	s := newSession(t, cli)
	names := []string{"a", "b/c", "d"}
	l, err := s.AcquireAll(ctx, names)
	if err != nil {
		t.Fatal(err)
	}
	if l.Name() != "a" || len(l.Keys()) != 3 {
		t.Fatalf("Name %q Keys %v", l.Name(), l.Keys())
	}
	for i, key := range l.Keys() {
		resp, err := cli.Get(ctx, key)
		if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].CreateRevision != int64(l.Token()) {
			t.Fatalf("key %s of %q: %v %v; want create revision = token %v", key, names[i], resp, err, l.Token())
		}
		st, err := holders.Inspect(ctx, cli, prefix(t), names[i])
		if err != nil || st.Holder == nil || st.Holder.Token != l.Token() || !slices.Equal(st.Holder.Names, names) {
			t.Fatalf("Inspect(%q) = %+v, %v; want the set as holder", names[i], st.Holder, err)
		}
	}
	w := queueWaiter(t, ctx, newSession(t, cli), "b/c", 2)
	mustNotReceive(t, w, 300*time.Millisecond, "the set holds b/c")
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	mustReceive(t, w, "the set was released")
	if keys := keysUnder(t, cli, prefix(t)); len(keys) != 1 {
		t.Errorf("keys after release: %v, want only the waiter's", keys)
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("second Release = %v", err)
	}
}

// TestAcquireAllQueuesInEveryName: a set waits for an older holder of one
// of its names, and is older than a later contender of another.
func TestAcquireAllQueuesInEveryName(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	hb, err := newSession(t, cli).Acquire(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	s := newSession(t, cli)
	res := make(chan acquired, 1)
	go func() {
		l, err := s.AcquireAll(ctx, []string{"a", "b"})
		res <- acquired{l, err}
	}()
	waitQueued(t, cli, "a", 1)
	waitQueued(t, cli, "b", 2)
	later := queueWaiter(t, ctx, newSession(t, cli), "a", 2)
	mustNotReceive(t, res, 300*time.Millisecond, "b is held")
	mustNotReceive(t, later, 10*time.Millisecond, "the set queued for a first")
	if err := hb.Release(ctx); err != nil {
		t.Fatal(err)
	}
	set := mustReceive(t, res, "b was released")
	mustNotReceive(t, later, 300*time.Millisecond, "the set holds a")
	_ = set.Release(ctx)
	mustReceive(t, later, "the set released a")
}

func TestAcquireAllLosesWhenAnyKeyGoes(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	l, err := newSession(t, cli).AcquireAll(ctx, []string{"a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Delete(ctx, l.Keys()[2]); err != nil {
		t.Fatal(err)
	}
	waitLost(t, l, lock.ErrKeyDeleted, 20*time.Second, "the key of one name of the set was deleted")
}

func TestAcquireAllRejectsBadSets(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	s := newSession(t, cli)
	many := make([]string, lock.MaxNames+1)
	for i := range many {
		many[i] = fmt.Sprint(i)
	}
	for _, tc := range []struct {
		names []string
		opts  []lock.AcquireOption
		want  error
	}{
		{nil, nil, lock.ErrInvalidName},
		{[]string{"a", "b", "a"}, nil, lock.ErrInvalidName},
		{[]string{"a", ""}, nil, lock.ErrInvalidName},
		{many, nil, lock.ErrInvalidName},
		{[]string{"a", "b"}, []lock.AcquireOption{lock.WithShared()}, lock.ErrInvalidOption},
		{[]string{"a", "b"}, []lock.AcquireOption{lock.WithLimit(2)}, lock.ErrInvalidOption},
	} {
		if _, err := s.AcquireAll(ctx, tc.names, tc.opts...); !errors.Is(err, tc.want) {
			t.Errorf("AcquireAll(%d names, %d options) = %v, want %v", len(tc.names), len(tc.opts), err, tc.want)
		}
	}
	if _, err := s.AcquireAll(ctx, many[:lock.MaxNames]); err != nil {
		t.Fatalf("AcquireAll of MaxNames names: %v", err)
	}
	if _, err := s.AcquireAll(ctx, []string{"x", "5"}); !errors.Is(err, lock.ErrAlreadyClaimed) {
		t.Errorf("AcquireAll of a name the session holds = %v, want ErrAlreadyClaimed", err)
	}
	if _, err := s.Acquire(ctx, "7"); !errors.Is(err, lock.ErrAlreadyClaimed) {
		t.Errorf("Acquire of a name the session holds in a set = %v, want ErrAlreadyClaimed", err)
	}
	if keys := keysUnder(t, cli, namePrefix(t, prefix(t), "x")); len(keys) != 0 {
		t.Errorf("a refused AcquireAll left %v", keys)
	}
}

func TestAcquireAllCanceledLeavesNothing(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	if _, err := newSession(t, cli).Acquire(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	s := newSession(t, cli)
	actx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := s.AcquireAll(actx, []string{"a", "b", "c"})
		done <- err
	}()
	waitQueued(t, cli, "c", 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled AcquireAll = %v", err)
	}
	for _, name := range []string{"a", "c"} {
		if keys := keysUnder(t, cli, namePrefix(t, prefix(t), name)); len(keys) != 0 {
			t.Errorf("canceled AcquireAll left %v under %q", keys, name)
		}
	}
	// The names are free to claim again on the same session.
	l, err := s.AcquireAll(ctx, []string{"a", "c"})
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(ctx)
}

// TestAcquireAllRequestSizeIsCheckedBeforeSending: a set whose transaction
// would be too large for etcd is refused with ErrInvalidName before
// anything is sent; sets near the bound that pass the check, etcd accepts.
func TestAcquireAllRequestSizeIsCheckedBeforeSending(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	s := newSession(t, cli)
	long := func(c string, n int) string { return strings.Repeat(c, n) }
	// '/' is escaped as %2F in keys: three bytes sent for one.
	refused := []string{long("/", 60001), "x" + long("/", 60000)}
	if l, err := s.AcquireAll(ctx, refused); !errors.Is(err, lock.ErrInvalidName) {
		t.Fatalf("AcquireAll of two names of 60,001 bytes = %v (lock returned: %t); want ErrInvalidName", err, l != nil)
	}
	if keys := keysUnder(t, cli, prefix(t)); len(keys) != 0 {
		t.Errorf("a refused set left %v", keys)
	}
	sixtyFour := make([]string, lock.MaxNames)
	for i := range sixtyFour {
		sixtyFour[i] = fmt.Sprintf("%03d", i) + long("n", 197)
	}
	for what, names := range map[string][]string{
		"two names of 50,000 bytes":                    {long("a", 50000), long("b", 50000)},
		"two names of 20,000 bytes escaped in keys":    {long("/", 20000), "x" + long("/", 19999)},
		"two names of 20,000 bytes escaped in JSON":    {long("\x01", 20000), long("\x02", 20000)},
		"64 names of 200 bytes (the documented bound)": sixtyFour,
	} {
		l, err := s.AcquireAll(ctx, names)
		if err != nil {
			t.Fatalf("AcquireAll of %s: %v", what, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAcquireAllRacesItsSessionsEnd: a session that ends (Close) while
// its AcquireAll runs ends the set: after Close, the AcquireAll has
// failed or its set is released. Under the race detector, the set's names
// and keys are read without racing the end.
func TestAcquireAllRacesItsSessionsEnd(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	for i := range 30 {
		s := newSession(t, cli)
		done := make(chan *lock.Lock, 1)
		go func() {
			l, _ := s.AcquireAll(ctx, []string{"a", "b", "c", "d"})
			done <- l
		}()
		time.Sleep(time.Duration(i) * 100 * time.Microsecond)
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if l := <-done; l != nil && l.Err() == nil {
			t.Fatalf("round %d: the set is still active after its session closed", i)
		}
	}
}
