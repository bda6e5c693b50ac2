// Package sqlfence fences SQL writes with an etcdlock token, on
// database/sql, for PostgreSQL and SQLite.
//
// A fence table keeps, per protected resource, the newest token admitted.
// WithFence runs the caller's statements in one transaction that first
// raises the resource's token, creating its row on first use:
//
//	INSERT INTO etcdlock_fence(resource, token) VALUES ($1, $2)
//	  ON CONFLICT (resource) DO UPDATE SET token = excluded.token
//	  WHERE etcdlock_fence.token <= excluded.token
//	-- 0 rows: a newer token has been admitted; roll back
//	SAVEPOINT etcdlock_fence_admitted
//	<the caller's statements>
//	-- if they fail: ROLLBACK TO SAVEPOINT etcdlock_fence_admitted
//	COMMIT
//
// The upsert takes the fence row's write lock before the caller's writes
// and holds it until commit, so no newer writer can slip between the check
// and the write. Equal tokens pass: one holder may write many times.
//
// # When the mark is raised
//
// The token is admitted when the upsert changes the row; the mark commits
// with the transaction, and it commits even when fn fails (fn's own
// statements are rolled back to the savepoint), so an older token is
// refused from then on whatever fn did. If the transaction does not commit
// at all (ctx done, connection lost), neither fn's statements nor the mark
// persist. fn must make every change through tx: a change made elsewhere
// is not fenced, and is not rolled back.
//
// # Isolation levels (PostgreSQL)
//
// WithFence uses the database's default isolation level; each is fenced:
//
//   - READ COMMITTED: a writer that waited on the fence row re-evaluates
//     the upsert's WHERE clause on the committed row, so a stale writer
//     gets *fencing.StaleTokenError and a newer one goes ahead.
//   - REPEATABLE READ and SERIALIZABLE: a writer that waited on the fence
//     row for a concurrent writer fails with a serialization failure
//     (SQLSTATE 40001), whichever token is newer. WithFence rolls back and
//     reads the committed mark: a stale writer gets *fencing.StaleTokenError;
//     a newer one is retried by WithFence itself (fn has not run yet), a
//     few times. If the retries run out, or a serialization failure comes
//     from fn's statements or the commit (SERIALIZABLE's read/write
//     dependencies), WithFence returns an error wrapping
//     ErrSerializationFailure: nothing was committed, and the caller
//     retries WithFence with the same token.
//
// SQLite serializes write transactions. Open the database with a busy
// timeout and immediate transactions, e.g. with modernc.org/sqlite
// "file:app.db?_pragma=busy_timeout(10000)&_txlock=immediate", so that
// concurrent writers wait for each other instead of failing with
// SQLITE_BUSY.
//
// # Poisoned marks
//
// WithFence is called by the lock holder with its own lock's token, which
// etcd issued. Should a token that no lock issued be admitted (a mistyped
// token in a script), every real token is refused until an operator lowers
// the mark to the newest token the lock has really issued (or deletes the
// row):
//
//	UPDATE etcdlock_fence SET token = $2 WHERE resource = $1
package sqlfence
