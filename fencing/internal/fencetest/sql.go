package fencetest

import (
	"database/sql"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
	_ "modernc.org/sqlite"             // the "sqlite" driver
)

// PostgresDSNEnv names the environment variable holding a DSN of a
// throwaway PostgreSQL server; hack/pg.sh starts one and `make test` sets it.
const PostgresDSNEnv = "ETCDLOCK_TEST_POSTGRES_DSN"

// A DB names a database to test against and opens it.
type DB struct {
	Name string
	Open func(t testing.TB) *sql.DB
}

// DBs returns every database the SQL guard is tested against: SQLite in
// WAL and rollback-journal modes, and PostgreSQL at each isolation level.
func DBs() []DB {
	return []DB{
		SQLite("sqlite", "wal"),
		SQLite("sqlite-rollback-journal", "delete"),
		Postgres("postgres", "read committed"),
		Postgres("postgres-repeatable-read", "repeatable read"),
		Postgres("postgres-serializable", "serializable"),
	}
}

// SQLite opens a new database file with the given journal mode, a busy
// timeout and immediate transactions.
func SQLite(name, journal string) DB {
	return DB{name, func(t testing.TB) *sql.DB {
		dsn := "file:" + filepath.Join(t.TempDir(), "fence.db") + "?_pragma=busy_timeout(20000)&_pragma=journal_mode(" + journal + ")&_txlock=immediate"
		db, err := sql.Open("sqlite", dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}}
}

// Postgres opens the server named by PostgresDSNEnv with every transaction
// at the given isolation level. Without the variable the test is skipped,
// or fails under CI.
func Postgres(name, isolation string) DB {
	return DB{name, func(t testing.TB) *sql.DB {
		dsn := os.Getenv(PostgresDSNEnv)
		if dsn == "" {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not set: CI must start PostgreSQL (hack/pg.sh)", PostgresDSNEnv)
			}
			t.Skipf("%s not set; run `make test` to start a throwaway PostgreSQL", PostgresDSNEnv)
		}
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatalf("%s: %v", PostgresDSNEnv, err)
		}
		q := u.Query()
		q.Set("default_transaction_isolation", isolation)
		u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // the server reads no "+" as a space
		db, err := sql.Open("pgx", u.String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		var got string
		if err := db.QueryRow(`SHOW transaction_isolation`).Scan(&got); err != nil || got != isolation {
			t.Fatalf("postgres at %s: isolation %q, %v; want %q", dsn, got, err, isolation)
		}
		return db
	}}
}
