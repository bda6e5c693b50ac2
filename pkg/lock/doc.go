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
// Package detached offers the same lock with explicit, stateless Acquire,
// Renew and Release calls for scripts that cannot keep a session open.
//
// What is not guaranteed: that a holder stops working in time if its process
// is paused or its clock runs far slower than real time. Fencing covers that
// case; the deadline only makes it rare.
//
// # Options
//
// Each entry point takes options of its own interface: SessionOption
// (NewSession, and package election's and kubelock's constructors),
// AcquireOption (Acquire, TryAcquire, AcquireAll) and DetachedOption
// (detached.New), so that an option given where it does not apply is a
// compile error. Each With function's doc names the interfaces its value
// implements; WithLockDelay sets a session's default and overrides it per
// acquisition. Values are checked at run time: a nil option, a value out
// of range, or two options that cannot be combined fail the entry point
// with ErrInvalidOption before etcd is contacted (ValidateSessionOptions
// and ValidateAcquireOptions run the same checks for options kept for
// later). Of two options that set the same thing, the later one sets it.
//
// Package holders observes and breaks the holders of a name (Inspect,
// List, Follow, Break).
//
// # Design
//
// The invariants and what enforces each, the key layout and record, the
// deadline formula, the token rules (never shared, per slot, per set),
// release, lock-delay, the watch path, the guardian of etcdlock run, and
// where the package departs from etcd's concurrency recipes and why, are
// in DESIGN.md beside this file. In short:
//
//   - keys: <prefix><escaped name>/<lease-id-hex> per contender (the
//     session's lease), <prefix><escaped name>%slot/<n> per semaphore slot,
//     <prefix><escaped name>%held/<lease-id-hex>-<token-hex> per
//     lock-delay acquisition's marker (no lease), and %delay/ and
//     %delayed/ keys that time a lock-delay; '%' and '/' in a name are
//     escaped as %25 and %2F, so no name's keys fall inside another's
//     range. Each value is a JSON record (DESIGN.md, "Key layout and record").
//   - deadline = send time of the last successful renewal + granted TTL −
//     margin, margin max(TTL/10, 250ms) by default, renewals every TTL/3.
//   - a token is a create revision: of the owner's key, of a semaphore
//     holder's slot key (increasing per slot), or of every key of an
//     AcquireAll (one for the set). No token is handed to two acquisitions:
//     a key the session left behind is deleted by its token and replaced,
//     never adopted.
//   - every delete of a contender or slot key compares the create revision
//     or the exact value written, so no call deletes another holder's key
//     (lock-delay markers are deleted by their mod revision, a delay's
//     started record without a compare).
package lock
