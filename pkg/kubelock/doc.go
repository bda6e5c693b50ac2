// Package kubelock is a client-go resourcelock.Interface on etcd, with
// fencing, for controllers built on client-go's leaderelection.LeaderElector
// or on controller-runtime's manager.
//
// Set a *Lock as LeaderElectionConfig.Lock (client-go) or as
// manager.Options.LeaderElectionResourceLockInterface (controller-runtime)
// and the elector works as it does with a Kubernetes Lease, with three
// differences:
//
//   - The record is one etcd key bound to an etcd lease that each successful
//     Update renews. When a leader stops renewing (crash, freeze,
//     partition), etcd deletes the record when the lease expires, and the
//     next candidate creates it on its next retry: failover takes about the
//     lease TTL, not client-go's LeaseDuration + RetryPeriod.
//   - Every term — the span between the Create that made this identity the
//     holder and the end of that key — has a fencing token (Term.Token):
//     the etcd revision of that Create, strictly larger than every earlier
//     term's token. Fence the controller's writes with it (package fencing).
//   - Every term has a context (Term.Context, or the one Lead passes to the
//     callback) that ends as soon as the term is over: when the record is
//     deleted or taken in etcd, or when no renewal succeeded by the
//     conservative deadline — the send time of the last successful renewal
//     plus the lease TTL etcd granted, minus a safety margin — which comes
//     before etcd could expire the lease. client-go's own OnStartedLeading
//     context ends only after RenewDeadline of failed renewals, which may
//     be after another candidate started leading.
//
// The lock relies on what client-go's LeaderElector does: Get before a
// takeover, Create only when Get found no record, Update only after Get or
// a successful write, and RecordEvent("became leader") / RecordEvent("stopped
// leading") around each leadership. While the elector leads, the lock
// refuses to start a new term (a Create after this identity's record
// vanished), so a lost term always surfaces as a lost election
// (OnStoppedLeading) instead of a silent new term under the same
// OnStartedLeading call; and when the elector stops leading, the term ends
// with it.
//
// No two candidates' term contexts overlap as long as the record changes
// only through the locks: a record deleted or a lease revoked by hand (an
// operator's etcdctl del) is noticed through the watch, a moment after
// another candidate may already have created the record.
//
// Not supported: client-go's Coordinated leader election (LeaseCandidate
// objects), and taking over a record that another holder's etcd lease still
// holds — a candidate waits until that lease ends.
package kubelock
