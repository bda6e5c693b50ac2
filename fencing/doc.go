// Package fencing defines the fencing token that etcdlock hands to every lock
// holder, and the in-process Guard; subpackages guard other resources.
//
// A token is the etcd create revision of the owner's key. Successive owners
// of one lock name always receive strictly increasing tokens, so a resource
// that remembers the newest token it has admitted can refuse any write from
// an owner that has since been superseded — even one that still believes it
// holds the lock.
//
// # The rule every guard keeps
//
// A resource remembers the newest token it has admitted, not the newest
// whose write succeeded: the mark is raised when a token is admitted,
// before its write runs, and stays raised whatever the write does next. A
// write that fails part-way may already have changed the resource, so an
// older token must not write after it. Equal tokens pass: one holder may
// write many times with its token. Each guard checks the token and applies
// the write in one critical section.
//
//   - Guard (in-process): Do raises the mark when it admits the token, then
//     runs write under the resource's mutex. write must finish its changes
//     before it returns; it may call Current (which returns its own token)
//     but not Do or Reset for the same resource.
//   - httpfence (HTTP handlers): the mark is raised when the request's
//     token is admitted, before the handler runs; the status the handler
//     answers with plays no part. The handler must finish its changes
//     before it returns; put http.TimeoutHandler outside the middleware.
//   - sqlfence (PostgreSQL, SQLite): the mark is raised by the first
//     statement of the transaction and commits with it, also when fn fails
//     (fn's statements are rolled back to a savepoint). fn must make every
//     change through its transaction. At REPEATABLE READ and SERIALIZABLE a
//     serialization failure is mapped to the stale-token error or retried.
//   - etcdfence (etcd keys): no mark is kept. A write is admitted only while
//     the owner's key exists with the token as its create revision, checked
//     and applied in one etcd transaction; a superseded owner's key is gone,
//     so its token is never admitted again.
//
// # Poisoned marks
//
// A token far above any real one, once admitted, refuses every real token.
// httpfence.WithCeiling with etcdfence.Ceiling refuses a token above the
// lock's etcd revision before it is admitted; otherwise an operator lowers
// the mark (Guard.Reset; for sqlfence, an UPDATE of the fence table).
// etcdfence cannot be poisoned: it admits only a token that is the create
// revision of a live key.
package fencing
