package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/fencing/internal/fencetest"
	"github.com/etcdlock/etcdlock/fencing/sqlfence"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
)

// A writer that waited on the fence row while a concurrent writer held it
// is refused with ErrStaleToken if the holder's token was newer, and goes
// ahead if it was older, at every PostgreSQL isolation level.
func TestWithFenceWaiterAtEachIsolationLevel(t *testing.T) {
	for _, b := range backends() {
		if !strings.HasPrefix(b.Name, "postgres") {
			continue
		}
		for _, tc := range []struct {
			name          string
			holder, waitr fencing.Token
			wantStale     bool
		}{
			{"stale waiter", 7, 6, true},
			{"newer waiter", 6, 7, false},
		} {
			t.Run(b.Name+"/"+tc.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				db := b.Open(t)
				data, _ := setup(t, db)
				res := "res-" + data
				if err := sqlfence.WithFence(ctx, db, res, 1, func(*sql.Tx) error { return nil }); err != nil {
					t.Fatal(err)
				}
				holding, release := make(chan struct{}), make(chan struct{})
				holderDone := make(chan error, 1)
				go func() {
					holderDone <- sqlfence.WithFence(ctx, db, res, tc.holder, func(tx *sql.Tx) error {
						close(holding)
						<-release
						_, err := tx.ExecContext(ctx, `UPDATE `+data+` SET value = $1 WHERE id = 1`, int64(tc.holder))
						return err
					})
				}()
				<-holding
				ran := false
				waiterDone := make(chan error, 1)
				go func() {
					waiterDone <- sqlfence.WithFence(ctx, db, res, tc.waitr, func(tx *sql.Tx) error {
						ran = true
						_, err := tx.ExecContext(ctx, `UPDATE `+data+` SET value = $1 WHERE id = 1`, int64(tc.waitr))
						return err
					})
				}()
				etcdtest.Eventually(t, 30*time.Second, func() bool {
					var n int
					_ = db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
						WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO etcdlock_fence%'`).Scan(&n)
					return n == 1
				}, "the waiter never waited on the fence row")
				close(release)
				if err := <-holderDone; err != nil {
					t.Fatalf("holder: %v", err)
				}
				err := <-waiterDone
				var stale *fencing.StaleTokenError
				if tc.wantStale {
					if !errors.As(err, &stale) || stale.Current != tc.holder || ran {
						t.Fatalf("stale waiter: %v (fn ran: %v), want StaleTokenError current %v", err, ran, tc.holder)
					}
				} else if err != nil {
					t.Fatalf("newer waiter: %v", err)
				}
				want := max(tc.holder, tc.waitr)
				var v int64
				if err := db.QueryRowContext(ctx, `SELECT value FROM `+data+` WHERE id = 1`).Scan(&v); err != nil || fencing.Token(v) != want {
					t.Errorf("row holds %d (%v), want %v", v, err, want)
				}
				if cur, err := sqlfence.Current(ctx, db, res); err != nil || cur != want {
					t.Errorf("mark %v (%v), want %v", cur, err, want)
				}
			})
		}
	}
}

// At SERIALIZABLE, two writers of different resources whose statements
// form a write skew cannot both commit: the one refused gets an error
// wrapping ErrSerializationFailure (not a stale token), and its retry with
// the same token succeeds.
func TestWithFenceSerializationFailureIsRetryable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := fencetest.Postgres("postgres-serializable", "serializable").Open(t)
	data, _ := setup(t, db)
	if _, err := db.ExecContext(ctx, `INSERT INTO `+data+` (id, value) VALUES (2, 0)`); err != nil {
		t.Fatal(err)
	}
	var read sync.WaitGroup
	read.Add(2)
	// skew reads the other row and writes its own: each writer's read is
	// the other's write.
	skew := func(own, other int, once *sync.Once) func(tx *sql.Tx) error {
		return func(tx *sql.Tx) error {
			defer once.Do(read.Done) // never leave the partner waiting
			var v int64
			if err := tx.QueryRowContext(ctx, `SELECT value FROM `+data+` WHERE id = $1`, other).Scan(&v); err != nil {
				return err
			}
			once.Do(read.Done)
			read.Wait()
			_, err := tx.ExecContext(ctx, `UPDATE `+data+` SET value = $1 WHERE id = $2`, v+1, own)
			return err
		}
	}
	var onceA, onceB sync.Once
	errs := make(chan error, 2)
	go func() { errs <- sqlfence.WithFence(ctx, db, "skew-a-"+data, 3, skew(1, 2, &onceA)) }()
	go func() { errs <- sqlfence.WithFence(ctx, db, "skew-b-"+data, 3, skew(2, 1, &onceB)) }()
	var failures int
	for range 2 {
		err := <-errs
		switch {
		case err == nil:
		case errors.Is(err, sqlfence.ErrSerializationFailure) && !errors.Is(err, fencing.ErrStaleToken):
			failures++
		default:
			t.Fatalf("write skew: %v", err)
		}
	}
	if failures != 1 {
		t.Fatalf("%d of the two skewed writers failed, want 1", failures)
	}
	// The retry runs alone (its partner has committed) and succeeds.
	var once sync.Once
	read.Add(1)
	if err := sqlfence.WithFence(ctx, db, "skew-retry-"+data, 3, skew(1, 2, &once)); err != nil {
		t.Fatalf("retry: %v", err)
	}
}
