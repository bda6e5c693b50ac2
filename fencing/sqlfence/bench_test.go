package sqlfence_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/fencing/sqlfence"
)

// BenchmarkWithFence compares a fenced one-row UPDATE with the same UPDATE
// in a plain transaction, on each backend, side by side in one run.
func BenchmarkWithFence(b *testing.B) {
	for _, be := range backends() {
		b.Run("db="+be.Name, func(b *testing.B) {
			db := be.Open(b)
			data, _ := setup(b, db)
			ctx := context.Background()
			update := func(tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, `UPDATE `+data+` SET value = value + 1 WHERE id = 1`)
				return err
			}
			b.Run("impl=plain", func(b *testing.B) {
				for b.Loop() {
					tx, err := db.BeginTx(ctx, nil)
					if err != nil {
						b.Fatal(err)
					}
					if err := update(tx); err != nil {
						b.Fatal(err)
					}
					if err := tx.Commit(); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("impl=fenced", func(b *testing.B) {
				for b.Loop() {
					if err := sqlfence.WithFence(ctx, db, "bench-"+data, fencing.Token(1), update); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
