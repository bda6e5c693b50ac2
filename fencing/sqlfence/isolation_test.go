package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/fencing"
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
