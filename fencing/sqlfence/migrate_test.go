package sqlfence_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/fencing/internal/fencetest"
	"github.com/etcdlock/etcdlock/fencing/sqlfence"
)

// Workers that start together each call Migrate: on PostgreSQL, where
// concurrent CREATE TABLE IF NOT EXISTS can fail in the catalog, every
// call succeeds. Each round uses a fresh schema, so the table is new.
func TestMigrateConcurrentlyOnPostgres(t *testing.T) {
	dsn := os.Getenv(fencetest.PostgresDSNEnv)
	if dsn == "" {
		fencetest.Postgres("postgres", "read committed").Open(t) // skips, or fails under CI
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() }) // after the schemas are dropped (cleanups run last first)
	for round := range 10 {
		schema := fmt.Sprintf("migrate_%d_%d", time.Now().UnixNano(), round)
		if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { admin.Exec("DROP SCHEMA " + schema + " CASCADE") })
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		db, err := sql.Open("pgx", u.String())
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(8)
		start := make(chan struct{})
		errs := make(chan error, 8)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				<-start
				errs <- sqlfence.Migrate(ctx, db)
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("round %d: concurrent Migrate: %v", round, err)
			}
		}
		db.Close()
	}
}
