// Package election runs a callback while this process is the elected leader
// among replicas, on top of package lock: one active controller, with
// fencing.
//
// It follows client-go's leaderelection in shape — callbacks
// OnStartedLeading, OnStoppedLeading and OnNewLeader, ReleaseOnCancel, a
// health check — and differs where that package is unsafe or slow:
//
//   - Expiry is decided by etcd's lease, and the leader stops at a
//     conservative deadline computed from the send time of its last
//     successful renewal: the leader's context is canceled before etcd could
//     elect someone else.
//   - Every term carries a fencing token (Term.Token), strictly larger than
//     any earlier term's. Pass it with every write the leader makes; a
//     deposed leader's late writes are then rejected (package fencing).
//   - Followers wait in FIFO order and learn of a release by watch, not by
//     polling: a graceful resign hands over within one watch notification,
//     and a crashed leader is replaced as soon as etcd expires its lease.
//   - Ownership is re-checked after every wait.
//
// Leader and Observe read the current leader without campaigning.
package election
