// Package watchmux carries a lock session's watches over one etcd gRPC
// watch stream, speaking etcd's Watch protocol by hand: each held lock's
// own key, each waiter's predecessor, a semaphore waiter's queue and
// slots. It is the library's only watch path; Follow runs one of its own.
//
// There are three kinds of Watch:
//
//   - WatchKey watches a key known to exist with a given create revision,
//     from a given revision on, created after a delay, and fires once on
//     its deletion. It survives broken streams and compactions: the mux
//     re-reads such keys, many in one transaction, and resumes each watch
//     after the read, or fires it if the key is gone or was re-created.
//   - WatchFromNow watches a key from the revision etcd creates the watch
//     at, says when that happened, and fires on a deletion or as soon as
//     its watch breaks; its owner then reads the key again.
//   - WatchRange watches a range of keys (a prefix) from a revision or
//     from now, for deletions or for puts too. It fires on its first event,
//     or passes every event on to its owner (a Feed, taken on the owner's
//     goroutine) until it breaks; either way a broken watch fires and its
//     owner reads again.
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
