// Package sqlfence fences SQL writes with an etcdlock token, on
// database/sql, for PostgreSQL and SQLite.
//
// A fence table keeps, per protected resource, the highest token that has
// written. WithFence runs the caller's statements in one transaction that
// first raises the resource's token, creating its row on first use:
//
//	INSERT INTO etcdlock_fence(resource, token) VALUES ($1, $2)
//	  ON CONFLICT (resource) DO UPDATE SET token = excluded.token
//	  WHERE etcdlock_fence.token <= excluded.token
//	-- 0 rows: a newer token has written; roll back
//	<the caller's statements>
//	COMMIT
//
// The upsert takes the fence row's write lock before the caller's writes and
// holds it until commit, so no newer writer can slip between the check and
// the write, and a stale writer that waited on the lock re-checks against
// the committed newer token (PostgreSQL re-evaluates the WHERE clause on the
// latest row version in READ COMMITTED; SQLite serializes write
// transactions). Equal tokens pass: one holder may write many times.
//
// SQLite: open the database with a busy timeout and immediate transactions,
// e.g. with modernc.org/sqlite
// "file:app.db?_pragma=busy_timeout(10000)&_txlock=immediate", so that
// concurrent writers wait for each other instead of failing with
// SQLITE_BUSY.
package sqlfence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/etcdlock/etcdlock/fencing"
)

// Schema creates the fence table. Run it with Migrate, or copy it into your
// own migrations. It is valid PostgreSQL and SQLite.
const Schema = `CREATE TABLE IF NOT EXISTS etcdlock_fence (
	resource TEXT PRIMARY KEY,
	token    BIGINT NOT NULL
)`

// Migrate creates the fence table if it does not exist.
func Migrate(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, Schema); err != nil {
		return fmt.Errorf("sqlfence: migrate: %w", err)
	}
	return nil
}

// WithFence runs fn in a transaction that commits only if token is at least
// the newest token that has written resource, and records token as the
// newest. If a newer token has written, fn does not run, nothing is written,
// and WithFence returns a *fencing.StaleTokenError. If fn returns an error,
// the transaction (fence update included) is rolled back and that error is
// returned. fn must not commit or roll back tx.
//
// An error from the commit itself leaves the outcome unknown, as with any
// database write; retrying with the same token is safe.
func WithFence(ctx context.Context, db *sql.DB, resource string, token fencing.Token, fn func(tx *sql.Tx) error) (err error) {
	if !token.IsValid() {
		return fmt.Errorf("sqlfence: %w: %d", fencing.ErrInvalidToken, token)
	}
	if resource == "" {
		return errors.New("sqlfence: empty resource name")
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlfence: begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	// One statement creates the row on first use or raises it, and takes
	// the row's write lock either way.
	res, err := tx.ExecContext(ctx, `INSERT INTO etcdlock_fence(resource, token) VALUES ($1, $2)
		ON CONFLICT (resource) DO UPDATE SET token = excluded.token
		WHERE etcdlock_fence.token <= excluded.token`, resource, int64(token))
	if err != nil {
		return fmt.Errorf("sqlfence: raise fence: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("sqlfence: raise fence: %w", err)
	}
	if n == 0 {
		stale := &fencing.StaleTokenError{Resource: resource, Presented: token}
		var current int64
		if tx.QueryRowContext(ctx, `SELECT token FROM etcdlock_fence WHERE resource = $1`, resource).Scan(&current) == nil {
			stale.Current = fencing.Token(current)
		}
		return stale
	}
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlfence: commit: %w", err)
	}
	return nil
}

// Current returns the newest token that has written resource, or 0.
func Current(ctx context.Context, db *sql.DB, resource string) (fencing.Token, error) {
	var t int64
	err := db.QueryRowContext(ctx, `SELECT token FROM etcdlock_fence WHERE resource = $1`, resource).Scan(&t)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sqlfence: %w", err)
	}
	return fencing.Token(t), nil
}
