// Package watchmux carries many single-key deletion watches over one etcd
// gRPC watch stream, speaking etcd's Watch protocol by hand. It is the
// watch stream of a lock session: each held lock's own key, each waiter's
// predecessor.
//
// A Watch waits for one key's deletion and fires once. There are two kinds:
//
//   - WatchKey watches a key known to exist with a given create revision,
//     from a given revision on, created after a delay. It survives broken
//     streams and compactions: the mux re-reads such keys, many in one
//     transaction, and resumes each watch after the read, or fires it if
//     the key is gone or was re-created.
//   - WatchFromNow watches a key from the revision etcd creates the watch
//     at, says when that happened, and fires on a deletion or as soon as
//     its watch breaks; its owner then reads the key again.
//
// The stream is opened under clientv3.WithRequireLeader: a member that has
// lost its leader ends the stream (etcd does so after about three election
// timeouts), and the mux opens a new one, which the client's balancer
// places on another member. Without it a stream on a partitioned member
// stays open and silent, and a deletion made through the majority goes
// unnoticed for as long as the partition lasts.
//
// No stream is open while nothing needs one. A stream left without watches
// stays open for IdleTimeout, so that a session taking locks in bursts does
// not reopen it for every burst, and is then closed.
package watchmux
