// Package election runs a callback while this process is the elected leader
// among replicas, on top of package lock: one active controller, with
// fencing.
//
// It follows client-go's leaderelection in shape — callbacks
// OnStartedLeading, OnStoppedLeading and OnNewLeader, ReleaseOnCancel, a
// health check — and differs where that package is unsafe or slow:
//
//   - The next leader's OnStartedLeading never starts before the previous
//     term's context is canceled, however the term ended: a resign, a
//     crash, a missed deadline, an operator's delete of the leader key or
//     revoke of its lease. A leader stops by its term's deadline, a TTL
//     less a safety margin after its last renewal and after its last proof
//     of its keys; after an unclean end the next leader waits until the
//     old leader must have stopped, at most about one TTL. Every candidate
//     of an election must run this version.
//   - Every term carries a fencing token (Term.Token), strictly larger than
//     any earlier term's. Pass it with every write the leader makes; a
//     deposed leader's late writes are then rejected (package fencing).
//   - Followers wait in FIFO order and learn of a release by watch, not by
//     polling: a graceful resign hands over within one watch notification;
//     a crashed leader is replaced about one TTL after its last renewal.
//   - Ownership is re-checked after every wait.
//
// Leader and Observe read the current leader without campaigning.
package election
