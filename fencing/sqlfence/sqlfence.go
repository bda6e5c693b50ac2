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

// Migrate creates the fence table if it does not exist. Many processes may
// call it at once: PostgreSQL can refuse one of two concurrent CREATE
// TABLE IF NOT EXISTS with a unique violation in its catalog, and Migrate
// then finds the table the other created and returns nil.
func Migrate(ctx context.Context, db *sql.DB) error {
	if db == nil {
		return fmt.Errorf("%w: nil database", ErrInvalidArgument)
	}
	if _, err := db.ExecContext(ctx, Schema); err != nil {
		var n int
		if db.QueryRowContext(ctx, `SELECT count(*) FROM etcdlock_fence WHERE 1 = 0`).Scan(&n) == nil {
			return nil // created by a concurrent Migrate
		}
		return fmt.Errorf("sqlfence: migrate: %w", err)
	}
	return nil
}

// ErrSerializationFailure is wrapped by the error WithFence returns when
// the database refused the transaction with a serialization failure
// (SQLSTATE 40001, at REPEATABLE READ or SERIALIZABLE) and the token was
// not stale: none of fn's statements were committed (the raised mark may
// have been), and the caller should retry WithFence with the same token.
var ErrSerializationFailure = errors.New("sqlfence: serialization failure; retry with the same token")

// ErrInvalidArgument is returned, wrapped, by WithFence for an empty
// resource name, a nil database or a nil fn, before anything is sent.
var ErrInvalidArgument = errors.New("sqlfence: invalid argument")

// raiseAttempts bounds how often WithFence retries, by itself, a
// transaction whose fence upsert failed with a serialization failure:
// before fn has run, a retry is always safe.
const raiseAttempts = 8

// WithFence runs fn in a transaction that commits only if token is at least
// the newest token that has been admitted for resource, and records token
// as the newest. The transaction runs at the database's default isolation
// level (see the package doc for each level).
//
//   - A stale token (a newer one has been admitted): fn does not run,
//     nothing is written, and WithFence returns a *fencing.StaleTokenError.
//   - fn returns nil: fn's statements and the raised mark commit together.
//   - fn returns an error: fn's statements are rolled back (to a savepoint
//     taken after the fence upsert), the raised mark still commits, and
//     WithFence returns fn's error (joined with the commit's error if the
//     mark could not be committed).
//   - fn panics: as for an error, then the panic goes on (the transaction
//     is rolled back whole if the mark cannot be committed).
//
// fn must make its changes through tx and must not commit or roll back tx.
//
// An error from the commit itself leaves the outcome unknown, as with any
// database write; retrying with the same token is safe. A serialization
// failure returns an error wrapping ErrSerializationFailure: retry.
func WithFence(ctx context.Context, db *sql.DB, resource string, token fencing.Token, fn func(tx *sql.Tx) error) error {
	if !token.IsValid() {
		return fmt.Errorf("sqlfence: %w: %d", fencing.ErrInvalidToken, token)
	}
	switch {
	case resource == "":
		return fmt.Errorf("%w: empty resource name", ErrInvalidArgument)
	case db == nil:
		return fmt.Errorf("%w: nil database", ErrInvalidArgument)
	case fn == nil:
		return fmt.Errorf("%w: nil function", ErrInvalidArgument)
	}
	for attempt := 1; ; attempt++ {
		tx, err := admit(ctx, db, resource, token)
		if err != nil {
			if !isSerializationFailure(err) {
				return err
			}
			// A writer that waited on the fence row for a concurrent
			// writer gets a serialization failure at REPEATABLE READ or
			// SERIALIZABLE whichever token is newer.
			if stale := staleAfter(ctx, db, resource, token); stale != nil {
				return stale
			}
			if attempt < raiseAttempts {
				continue
			}
			return fmt.Errorf("%w: %w", ErrSerializationFailure, err)
		}
		if err := run(ctx, tx, fn); err != nil {
			if isSerializationFailure(err) {
				if stale := staleAfter(ctx, db, resource, token); stale != nil {
					return stale
				}
				return fmt.Errorf("%w: %w", ErrSerializationFailure, err)
			}
			return err
		}
		return nil
	}
}

// admit begins a transaction and raises the fence in it; it returns the
// open transaction only if token was admitted.
func admit(ctx context.Context, db *sql.DB, resource string, token fencing.Token) (*sql.Tx, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("sqlfence: begin: %w", err)
	}
	// One statement creates the row on first use or raises it, and takes
	// the row's write lock either way.
	res, err := tx.ExecContext(ctx, `INSERT INTO etcdlock_fence(resource, token) VALUES ($1, $2)
		ON CONFLICT (resource) DO UPDATE SET token = excluded.token
		WHERE etcdlock_fence.token <= excluded.token`, resource, int64(token))
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	if err != nil {
		_ = tx.Rollback()
		return nil, fmt.Errorf("sqlfence: raise fence: %w", err)
	}
	if n == 0 {
		stale := &fencing.StaleTokenError{Resource: resource, Presented: token}
		var current int64
		if tx.QueryRowContext(ctx, `SELECT token FROM etcdlock_fence WHERE resource = $1`, resource).Scan(&current) == nil {
			stale.Current = fencing.Token(current)
		}
		_ = tx.Rollback()
		return nil, stale
	}
	if _, err := tx.ExecContext(ctx, `SAVEPOINT etcdlock_fence_admitted`); err != nil {
		_ = tx.Rollback()
		return nil, fmt.Errorf("sqlfence: savepoint: %w", err)
	}
	return tx, nil
}

// run runs fn in tx, in which the token has been admitted, and commits:
// all of it if fn succeeds, only the raised mark if fn fails — returns an
// error or panics: fn may have changed something outside the database
// before it failed, and an older token must not write after it, as with
// fencing.Guard. A panic goes on once tx has ended: the transaction would
// otherwise hold its connection and the fence row's lock (on SQLite, the
// database's) until the process ends.
func run(ctx context.Context, tx *sql.Tx, fn func(tx *sql.Tx) error) error {
	finished := false
	defer func() {
		if !finished {
			_ = keepMark(ctx, tx)
		}
	}()
	fnErr := fn(tx)
	finished = true
	if fnErr != nil {
		if err := keepMark(ctx, tx); err != nil {
			return errors.Join(fnErr, err)
		}
		return fnErr
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlfence: commit: %w", err)
	}
	return nil
}

// keepMark rolls fn's statements back to the savepoint taken after the
// fence upsert and commits the raised mark. If the rollback fails, the
// transaction is rolled back whole.
func keepMark(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, `ROLLBACK TO SAVEPOINT etcdlock_fence_admitted`); err != nil {
		_ = tx.Rollback()
		return fmt.Errorf("sqlfence: keep the raised mark: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlfence: commit: %w", err)
	}
	return nil
}

// staleAfter reads the committed mark after a serialization failure and
// returns the *fencing.StaleTokenError if it is newer than token, or nil.
func staleAfter(ctx context.Context, db *sql.DB, resource string, token fencing.Token) error {
	current, err := Current(ctx, db, resource)
	if err != nil || current <= token {
		return nil
	}
	return &fencing.StaleTokenError{Resource: resource, Presented: token, Current: current}
}

// isSerializationFailure reports whether err carries SQLSTATE 40001, as the
// errors of the PostgreSQL drivers do (pgx's *pgconn.PgError, lib/pq's
// *pq.Error).
func isSerializationFailure(err error) bool {
	var se interface{ SQLState() string }
	return errors.As(err, &se) && se.SQLState() == "40001"
}

// Current returns the newest token admitted for resource (whether or not
// its fn succeeded), or 0 if none was.
func Current(ctx context.Context, db *sql.DB, resource string) (fencing.Token, error) {
	switch {
	case resource == "":
		return 0, fmt.Errorf("%w: empty resource name", ErrInvalidArgument)
	case db == nil:
		return 0, fmt.Errorf("%w: nil database", ErrInvalidArgument)
	}
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
