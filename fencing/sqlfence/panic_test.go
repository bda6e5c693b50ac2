package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/fencing/sqlfence"
)

// A fn that panics (and a caller that recovers, as net/http does) is
// treated as one that returns an error: its statements are rolled back,
// the raised mark stays, so an older token cannot write after it, and the
// transaction ends, so the next writer of the resource, and on SQLite of
// any resource, is not blocked.
func TestWithFencePanicKeepsTheMark(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.Name, func(t *testing.T) {
			db := b.Open(t)
			data, _ := setup(t, db)
			res := "res-" + data
			func() {
				defer func() {
					if recover() == nil {
						t.Fatal("fn's panic did not go on")
					}
				}()
				_ = sqlfence.WithFence(context.Background(), db, res, 5, func(tx *sql.Tx) error {
					if _, err := tx.Exec(`UPDATE ` + data + ` SET value = 5 WHERE id = 1`); err != nil {
						return err
					}
					panic("fn failed")
				})
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if cur, err := sqlfence.Current(ctx, db, res); err != nil || cur != 5 {
				t.Errorf("mark after a panicking fn = %v (%v), want 5, as after an error", cur, err)
			}
			var stale *fencing.StaleTokenError
			if err := sqlfence.WithFence(ctx, db, res, 4, func(*sql.Tx) error { return nil }); !errors.As(err, &stale) {
				t.Errorf("an older token after a panicking fn: %v, want a StaleTokenError", err)
			}
			for _, r := range []string{res, res + "-other"} {
				if err := sqlfence.WithFence(ctx, db, r, 6, func(*sql.Tx) error { return nil }); err != nil {
					t.Fatalf("the next writer of %s after a panic: %v", r, err)
				}
			}
			var v int
			if err := db.QueryRowContext(ctx, `SELECT value FROM `+data+` WHERE id = 1`).Scan(&v); err != nil || v != 0 {
				t.Errorf("the panicking fn's write persisted: value %d, %v", v, err)
			}
		})
	}
}

// Current and Migrate refuse what WithFence refuses.
func TestCurrentAndMigrateRefuseBadArguments(t *testing.T) {
	ctx := context.Background()
	db := backends()[0].Open(t)
	if _, err := sqlfence.Current(ctx, nil, "r"); !errors.Is(err, sqlfence.ErrInvalidArgument) {
		t.Errorf("Current with a nil database = %v", err)
	}
	if _, err := sqlfence.Current(ctx, db, ""); !errors.Is(err, sqlfence.ErrInvalidArgument) {
		t.Errorf("Current of an empty resource = %v", err)
	}
	if err := sqlfence.Migrate(ctx, nil); !errors.Is(err, sqlfence.ErrInvalidArgument) {
		t.Errorf("Migrate with a nil database = %v", err)
	}
}
