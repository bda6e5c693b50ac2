// Command demo tells the worker-a / worker-b story against a real embedded
// etcd and a real SQLite database: a paused lock holder loses its lock, a
// new holder takes over with a larger fencing token, and the old holder's
// late write (refused by the database's fence) and late release (refused
// at once: its session is lost) change nothing.
//
//	go run ./hack/demo
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	_ "modernc.org/sqlite"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/fencing/sqlfence"
	"github.com/etcdlock/etcdlock/pkg/embedded"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

var start = time.Now()

func say(who, format string, args ...any) {
	fmt.Printf("[%5.2fs] %-9s %s\n", time.Since(start).Seconds(), who, fmt.Sprintf(format, args...))
}

func run() (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	etcd, err := embedded.Start(ctx)
	if err != nil {
		return err
	}
	defer etcd.Close()
	say("etcd", "embedded etcd serving on %s", etcd.Endpoints()[0])

	// worker-a reaches etcd through a proxy so the demo can freeze it, as
	// a long GC pause or a network partition would.
	t := &programTB{}
	defer t.cleanup()
	defer t.recoverFatal(&err)
	pause, aURL := etcdtest.Proxy(t, etcd.Endpoints()[0])
	cliA, err := newClient(aURL)
	if err != nil {
		return err
	}
	defer cliA.Close()
	cliB, err := newClient(etcd.Endpoints()...)
	if err != nil {
		return err
	}
	defer cliB.Close()

	db, cleanup, err := openDB(ctx)
	if err != nil {
		return err
	}
	defer cleanup()
	const name, resource = "orders", "orders.total"
	a, err := lock.NewSession(ctx, cliA, lock.WithOwner("worker-a"), lock.WithTTL(2*time.Second))
	if err != nil {
		return err
	}
	defer a.Close(context.Background())
	b, err := lock.NewSession(ctx, cliB, lock.WithOwner("worker-b"), lock.WithTTL(2*time.Second))
	if err != nil {
		return err
	}
	defer b.Close(context.Background())

	la, err := a.Acquire(ctx, name)
	if err != nil {
		return err
	}
	say("worker-a", "acquired %q with fencing token %s (lease TTL %v, deadline in %v)", name, la.Token(), a.TTL(), time.Until(a.Deadline()).Round(time.Millisecond))
	if err := write(ctx, db, la, resource, "100 (written by worker-a)"); err != nil {
		return err
	}
	say("worker-a", "wrote %s = 100 in SQLite with token %s: accepted", resource, la.Token())

	gotB := make(chan *lock.Lock, 1)
	errB := make(chan error, 1)
	go func() {
		l, err := b.Acquire(ctx, name)
		if err != nil {
			errB <- err
			return
		}
		gotB <- l
	}()
	say("worker-b", "waiting for %q", name)

	pause.PauseTx()
	pause.PauseRx()
	say("worker-a", "PAUSED (nothing it sends or receives moves; it cannot renew its lease)")

	<-la.Context().Done()
	say("worker-a", "lock LOST locally: %v — it stops work before etcd can expire the lease", la.Err())

	var lb *lock.Lock
	select {
	case lb = <-gotB:
	case err := <-errB:
		return err
	}
	var lost *lock.LostError
	if errors.As(la.Err(), &lost) {
		say("etcd", "expired worker-a's lease and deleted its key, %v after worker-a had stopped", time.Since(lost.At).Round(time.Millisecond))
	}
	say("worker-b", "acquired %q with fencing token %s (> %s)", name, lb.Token(), la.Token())
	if err := write(ctx, db, lb, resource, "250 (written by worker-b)"); err != nil {
		return err
	}
	say("worker-b", "wrote %s = 250 in SQLite with token %s: accepted", resource, lb.Token())

	pause.UnpauseTx()
	pause.UnpauseRx()
	say("worker-a", "RESUMED, unaware of the pause, sends its late write with token %s", la.Token())
	err = write(ctx, db, la, resource, "999 (late write by worker-a)")
	var stale *fencing.StaleTokenError
	if !errors.As(err, &stale) {
		return fmt.Errorf("late write was not rejected as stale: %v", err)
	}
	say("sqlite", "REJECTED worker-a's write, rolled back: %v", err)

	// worker-a's session was lost to its deadline: Release sends nothing
	// and returns the loss, since the lease, renewed no more, takes its
	// keys. Nothing worker-a sends can free worker-b's key: every delete
	// it could send compares its own token.
	err = la.Release(ctx)
	if !errors.Is(err, lock.ErrSessionLost) {
		return fmt.Errorf("worker-a's late release returned %v, want the session's loss", err)
	}
	say("worker-a", "released its lock: refused at once, its session is lost; the lease takes its key, never worker-b's")
	if k, err := cliB.Get(ctx, lb.Key()); err != nil || len(k.Kvs) != 1 || lb.Err() != nil {
		return fmt.Errorf("worker-b's lock ended (%v) after worker-a's release (%v)", lb.Err(), err)
	}
	say("worker-b", "still holds %q", name)

	var final string
	if err := db.QueryRowContext(ctx, `SELECT value FROM totals WHERE name = $1`, resource).Scan(&final); err != nil {
		return err
	}
	say("sqlite", "final value of %s: %s", resource, final)
	if err := lb.Release(ctx); err != nil {
		return err
	}
	say("worker-b", "released %q", name)
	return nil
}

// write is a fenced SQL write: the UPDATE commits only in the same
// transaction that raises the resource's fence to the writer's token.
func write(ctx context.Context, db *sql.DB, l *lock.Lock, resource, value string) error {
	return sqlfence.WithFence(ctx, db, resource, l.Token(), func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE totals SET value = $1 WHERE name = $2`, value, resource)
		return err
	})
}

// openDB creates a SQLite database in a temporary directory with the fence
// table and the demo's data.
func openDB(ctx context.Context) (*sql.DB, func(), error) {
	dir, err := os.MkdirTemp("", "etcdlock-demo-")
	if err != nil {
		return nil, nil, err
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "demo.db")+"?_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	cleanup := func() { db.Close(); os.RemoveAll(dir) }
	for _, q := range []string{
		sqlfence.Schema,
		`CREATE TABLE totals (name TEXT PRIMARY KEY, value TEXT NOT NULL)`,
		`INSERT INTO totals (name, value) VALUES ('orders.total', '0')`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			cleanup()
			return nil, nil, err
		}
	}
	return db, cleanup, nil
}

func newClient(endpoints ...string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
}
