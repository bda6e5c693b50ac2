package lock_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/pkg/detached"
	"github.com/etcdlock/etcdlock/pkg/holders"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// Every record written carries this process's host and pid, with
// the origin now read once per session / Detached: mutex, reader,
// semaphore holder, AcquireAll set, Detached, and a second session.
func TestRecordsCarryHostAndPID(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), client(t)
	host, _ := os.Hostname()
	pid := os.Getpid()
	check := func(name string) {
		t.Helper()
		st, err := holders.Inspect(ctx, cli, prefix(t), name)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Holders) == 0 {
			t.Fatalf("%s: no holder", name)
		}
		for _, h := range st.Holders {
			if h.Host != host || h.PID != pid || h.Owner == "" || h.Acquired.IsZero() {
				t.Errorf("%s: record %+v, want host %q pid %d", name, h, host, pid)
			}
		}
	}
	for i := range 2 {
		s := newSession(t, cli)
		if _, err := s.Acquire(ctx, fmt.Sprintf("m%d", i)); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("m%d", i))
		if _, err := s.Acquire(ctx, fmt.Sprintf("r%d", i), lock.WithShared()); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("r%d", i))
		if _, err := s.Acquire(ctx, fmt.Sprintf("s%d", i), lock.WithLimit(2)); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("s%d", i))
		if _, err := s.AcquireAll(ctx, []string{fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", i)}); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("a%d", i))
		check(fmt.Sprintf("b%d", i))
	}
	d, err := detached.New(cli, lock.WithPrefix(prefix(t)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Acquire(ctx, "detached", "me", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	check("detached")
}
