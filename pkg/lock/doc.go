// Package lock provides distributed locks on etcd that stay safe when
// networks fail, processes pause and replies are lost.
//
// A Session is one etcd lease, renewed in the background. The session keeps
// a conservative deadline — the send time of the last successful renewal
// plus the TTL etcd granted, minus a safety margin — and considers itself
// lost the moment that deadline passes, before the etcd server could expire
// the lease and hand the lock to someone else.
//
// Session.Acquire and Session.TryAcquire return a *Lock. Every contender for
// a name writes its own key, <prefix><name>/<lease-id-hex>, bound to its
// lease; the key with the lowest create revision owns the lock and the rest
// wait in FIFO order, each watching only its predecessor. The owner's key's
// create revision is the lock's fencing token (Lock.Token): successive owners
// of a name get strictly increasing tokens. Pass the token with every write
// to a protected resource and have the resource reject tokens older than the
// newest it has seen (package fencing); that, not the lock alone, is what
// keeps a paused or partitioned former owner from corrupting data.
//
// Work under a lock belongs under Lock.Context, which is canceled when the
// lock is lost or released. Lock.Release deletes the key with a
// compare-and-delete, so it is always safe to retry and can never free a
// newer owner's lock.
//
// Detached offers the same lock with explicit, stateless Acquire, Renew and
// Release calls for scripts that cannot keep a session open.
//
// What is not guaranteed: that a holder stops working in time if its process
// is paused or its clock runs far slower than real time. Fencing covers that
// case; the deadline only makes it rare.
package lock
