// Package kubelock is a client-go resourcelock.Interface on etcd, with
// fencing, for controllers built on client-go's leaderelection.LeaderElector
// or on controller-runtime's manager.
//
// # Setting it up
//
// Make the lock with New, passing the elector's durations (DefaultTimings
// are client-go's and controller-runtime's defaults) and package lock's
// options for the lease (lock.WithTTL, lock.WithPrefix...), and give the
// elector the same durations (Lock.Timings).
//
//   - client-go: complete the elector's LeaderElectionConfig with
//     ElectionConfig: it sets the lock and its durations and runs
//     OnStartedLeading on the term's context (Lock.Lead), which ends with
//     the term and carries it (TermFrom). A lock driven at other durations
//     than its own says so in its log and its metrics (Lock.SetMetrics).
//   - controller-runtime: build the manager's options with package
//     ctrlmanager (ctrlmanager.Options). Setting the lock as
//     manager.Options.LeaderElectionResourceLockInterface alone is not
//     safe: controller-runtime cancels the Runnables' contexts only once
//     client-go's elector has stopped leading — RetryPeriod + RenewDeadline
//     after the last renewal, another RenewDeadline with ReleaseOnCancel —
//     while etcd hands the record on a TTL after the last renewal, or at
//     once when it is deleted. ctrlmanager.Options ties the Runnables'
//     contexts to the term (Lock.RunContext).
//
// New refuses durations that cannot keep a term: client-go's own rules
// (RenewDeadline above 1.2 × RetryPeriod, LeaseDuration above
// RenewDeadline), and TTL − safety margin ≥ 2 × RetryPeriod, so that a
// leader whose etcd answers promptly keeps its term through one failed
// renewal (client-go sends a renewal RetryPeriod after the previous call
// returned). The error names the shortest TTL and the longest RetryPeriod
// that work. Each Get, Create and Update is bounded by
// Timings.CallTimeout (half of RenewDeadline, at least 1 s): client-go
// calls with no deadline while it follows, and a call on a dead
// connection would otherwise never return.
//
// # How it differs from a Kubernetes Lease
//
//   - The record is one etcd key bound to an etcd lease that each successful
//     Update renews. When a leader stops renewing (crash, freeze,
//     partition), etcd deletes the record when the lease expires, and the
//     next candidate creates it on its next retry: failover takes about the
//     lease TTL plus a RetryPeriod, not client-go's LeaseDuration +
//     RetryPeriod. LeaseDuration only has to satisfy client-go.
//   - Every term — the span between the Create that made this identity the
//     holder and the end of that key — has a fencing token (Term.Token):
//     the etcd revision of that Create, strictly larger than every earlier
//     term's token. Fence the controller's writes with it (package fencing).
//   - Every term has a context (Term.Context, the one Lead passes to the
//     callback, and Lock.RunContext's) that ends as soon as the term is
//     over: when the record is deleted or taken in etcd, when the elector
//     stops leading, or when no renewal succeeded by the conservative
//     deadline — the send time of the last successful renewal plus the
//     lease TTL etcd granted, minus a safety margin — which comes before
//     etcd could expire the lease. client-go's own OnStartedLeading context
//     ends only after RenewDeadline of failed renewals, which may be after
//     another candidate started leading.
//   - A release (ReleaseOnCancel) revokes the term's etcd lease, which
//     deletes the record; the Lease lock keeps its object with an empty
//     holder. The record lives on its term's lease: a record kept after
//     the release would have no lease to expire it, and the next term
//     would have to start with an Update of it, where every term of this
//     lock starts with a Create, whose revision is its token. A Get after
//     a release finds no record (apierrors.IsNotFound) instead of an empty
//     holder; client-go's elector creates the record either way. An
//     elector that stops leading without a release leaves the record
//     under its lease until etcd expires it, a TTL after the last renewal;
//     followers wait for that (the Lease lock makes them wait
//     LeaseDuration).
//   - LeaderTransitions is counted by the lock, not by client-go: it is
//     the number of terms before the current one, kept in a second key
//     beside the record (the count, without a lease) whose version each
//     Create raises. client-go counts a transition only when it takes over
//     a record with an Update, and every term of this lock starts with a
//     Create. Tokens increase with every term too (not by one).
//   - AcquireTime and RenewTime come back from Get to the microsecond, as
//     a Lease keeps them; the stored value carries them beside the
//     record's JSON, whose times have whole seconds.
//   - Update (a renewal or a release) before the lock has read the record
//     (Get) or created it, or
//     after its last Get found none, returns ErrNotRead, a plain error, as
//     the Lease lock's "lease not initialized". An Update of a record that changed or vanished since
//     this lock read it is a conflict (apierrors.IsConflict); the Lease
//     lock gets a conflict for a changed Lease too, but NotFound for a
//     deleted one: this lock holds no object to send, and a conflict says
//     what happened — the record is not the one this lock read.
//     client-go's elector follows any failed Update with a Get.
//   - A candidate does not take over a record: it waits until the record
//     is gone (its lease ended or it was released) and creates a new one.
//
// The lock relies on what client-go's LeaderElector does: Get before a
// takeover, Create only when Get found no record, Update only after Get or
// a successful write, and RecordEvent("became leader") / RecordEvent("stopped
// leading") around each leadership. While the elector leads, the lock
// refuses to start a new term (a Create after this identity's record
// vanished), so a lost term always surfaces as a lost election
// (OnStoppedLeading) instead of a silent new term under the same
// OnStartedLeading call; and when the elector stops leading, the term ends
// with it. A lock serves one elector at a time: a second elector that
// starts leading on it while another leads ends the term for both
// (ErrConcurrentElectors).
//
// No two candidates' term contexts overlap as long as the record changes
// only through the locks and no process is frozen past its term (SIGSTOP,
// a container or VM freeze, a stop-the-world pause): a frozen holder sees
// nothing while it is, and once resumed its context ends, but the unit of
// work it was in, or one more it starts before it looks at its context,
// runs beside the next leader's. Fence the writes with the term's token
// (Term.Token), and the resource refuses them. A record deleted by hand
// (an operator's etcdctl del) while its holder's lease lives lets no
// candidate in: its Create waits (ErrHolderAlive) until the holder,
// having seen the deletion through its watch and ended its term, revokes
// the lease, or until etcd expires it; the term count beside the record
// keeps the latest term's lease for candidates that never saw the record
// (etcdctl del --prefix of the name deletes the count too, and reopens
// that window). One case remains a window: an etcd lease revoked by hand
// (etcdctl lease revoke), which deletes the record and the lease at once.
// There the holder's term ends when its
// watch delivers the deletion — within 54 ms on a healthy connection in
// the measurements of the package's README — and at most at its
// conservative deadline, TTL − margin after its last renewal, when replies
// are slow or its watch is cut.
//
// # Operating it
//
// The elector's events go to a Kubernetes event recorder with
// Lock.SetEventRecorder, as the Lease lock's do. Lock.Healthz is a health
// check with client-go's HealthzAdaptor contract: it fails while the
// elector still leads long after its term ended. `etcdlock kube-leaders`
// lists the records under a prefix: holder, token, etcd lease, acquired and
// renewed times, transitions.
//
// Not supported: client-go's Coordinated leader election (LeaseCandidate
// objects).
package kubelock
