package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/fencing/internal/fencetest"
	"github.com/etcdlock/etcdlock/fencing/sqlfence"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func backends() []fencetest.DB { return fencetest.DBs() }

// setup creates the fence table and a per-test data table.
func setup(t testing.TB, db *sql.DB) (data, log string) {
	t.Helper()
	ctx := context.Background()
	if err := sqlfence.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	suffix := fmt.Sprintf("%d", rand.Uint32())
	data, log = "data_"+suffix, "applied_"+suffix
	for _, q := range []string{
		`CREATE TABLE ` + data + ` (id INTEGER PRIMARY KEY, value BIGINT NOT NULL)`,
		`INSERT INTO ` + data + ` (id, value) VALUES (1, 0)`,
		`CREATE TABLE ` + log + ` (seq BIGINT PRIMARY KEY, token BIGINT NOT NULL)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	return data, log
}

func TestWithFenceSemantics(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			db := b.Open(t)
			data, _ := setup(t, db)
			res := "res-" + data
			set := func(v int) func(*sql.Tx) error {
				return func(tx *sql.Tx) error {
					_, err := tx.ExecContext(ctx, `UPDATE `+data+` SET value = $1 WHERE id = 1`, v)
					return err
				}
			}
			value := func() (v int) {
				if err := db.QueryRowContext(ctx, `SELECT value FROM `+data+` WHERE id = 1`).Scan(&v); err != nil {
					t.Fatal(err)
				}
				return v
			}
			if err := sqlfence.WithFence(ctx, db, res, 10, set(1)); err != nil {
				t.Fatal(err)
			}
			if err := sqlfence.WithFence(ctx, db, res, 10, set(2)); err != nil {
				t.Fatalf("equal token: %v", err)
			}
			err := sqlfence.WithFence(ctx, db, res, 9, set(3))
			var stale *fencing.StaleTokenError
			if !errors.As(err, &stale) || stale.Presented != 9 || stale.Current != 10 || stale.Resource != res {
				t.Fatalf("older token: %v", err)
			}
			if v := value(); v != 2 {
				t.Fatalf("stale write applied: value %d", v)
			}
			// An admitted token whose fn fails keeps its mark; fn's writes
			// roll back.
			failing := func(tok fencing.Token, fn func(*sql.Tx) error) error {
				t.Helper()
				err := sqlfence.WithFence(ctx, db, res, tok, fn)
				if cur, err := sqlfence.Current(ctx, db, res); err != nil || cur != tok {
					t.Fatalf("an admitted token's failed fn left the fence at %v (%v), want %v", cur, err, tok)
				}
				if v := value(); v != 2 {
					t.Fatalf("rolled-back write applied: value %d", v)
				}
				return err
			}
			boom := errors.New("boom")
			if err := failing(20, func(tx *sql.Tx) error { set(4)(tx); return boom }); !errors.Is(err, boom) {
				t.Fatalf("fn error = %v", err)
			}
			if err := sqlfence.WithFence(ctx, db, res, 15, set(6)); !errors.Is(err, fencing.ErrStaleToken) {
				t.Fatalf("token 15 after admitted 20: %v", err)
			}
			// A failing statement (it aborts a PostgreSQL transaction).
			duplicate := func(tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, `INSERT INTO `+data+` (id, value) VALUES (1, 7)`)
				return err
			}
			if err := failing(21, duplicate); err == nil {
				t.Fatal("duplicate key accepted")
			}
			if err := sqlfence.WithFence(ctx, db, res, 0, set(5)); !errors.Is(err, fencing.ErrInvalidToken) {
				t.Fatalf("zero token: %v", err)
			}
			for _, bad := range []error{
				sqlfence.WithFence(ctx, db, "", 30, set(5)),
				sqlfence.WithFence(ctx, nil, res, 30, set(5)),
				sqlfence.WithFence(ctx, db, res, 30, nil),
			} {
				if !errors.Is(bad, sqlfence.ErrInvalidArgument) {
					t.Errorf("bad argument: %v", bad)
				}
			}
			if cur, err := sqlfence.Current(ctx, db, "never-written"); err != nil || cur != 0 {
				t.Fatalf("Current of a new resource = %v, %v", cur, err)
			}
		})
	}
}

// Many writers with interleaved tokens write the same row. Afterwards the
// row holds the newest token's data, and the applied writes, in commit
// order, never go back in token order (a stale write applied would).
func TestWithFenceConcurrentWriters(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			db := b.Open(t)
			db.SetMaxOpenConns(8)
			data, log := setup(t, db)
			res := "res-" + data
			const writers, attempts = 8, 400
			tokens := fencetest.Tokens(attempts, 16, 2)
			var (
				mu       sync.Mutex
				rejected int
				applied  int
				wg       sync.WaitGroup
			)
			for range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for tok := range tokens {
						err := sqlfence.WithFence(ctx, db, res, tok, func(tx *sql.Tx) error {
							if _, err := tx.ExecContext(ctx, `INSERT INTO `+log+` (seq, token) SELECT COALESCE(MAX(seq), 0) + 1, $1 FROM `+log, int64(tok)); err != nil {
								return err
							}
							_, err := tx.ExecContext(ctx, `UPDATE `+data+` SET value = $1 WHERE id = 1`, int64(tok))
							return err
						})
						mu.Lock()
						switch {
						case err == nil:
							applied++
						case errors.Is(err, fencing.ErrStaleToken):
							rejected++
						default:
							t.Error(err)
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			rows, err := db.QueryContext(ctx, `SELECT token FROM `+log+` ORDER BY seq`)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var prev, staleApplied int64
			n := 0
			for rows.Next() {
				var tok int64
				if err := rows.Scan(&tok); err != nil {
					t.Fatal(err)
				}
				if tok < prev {
					staleApplied++
				}
				prev = max(prev, tok)
				n++
			}
			var final int64
			if err := db.QueryRowContext(ctx, `SELECT value FROM `+data+` WHERE id = 1`).Scan(&final); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: writes attempted %d, applied %d, stale rejected %d, stale applied %d", b.Name, attempts, applied, rejected, staleApplied)
			if staleApplied != 0 {
				t.Errorf("%d stale writes applied", staleApplied)
			}
			if n != applied || applied+rejected != attempts {
				t.Errorf("log rows %d, applied %d, rejected %d, attempts %d", n, applied, rejected, attempts)
			}
			if final != attempts/2 {
				t.Errorf("row holds token %d's data, want the newest, %d", final, attempts/2)
			}
		})
	}
}
