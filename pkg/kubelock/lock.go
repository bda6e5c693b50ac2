package kubelock

import (
	"context"
	"errors"
	"fmt"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/etcdlock/etcdlock/pkg/kuberecord"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// The events client-go's LeaderElector records around a term
// (tools/leaderelection/leaderelection.go: acquire and renew).
const (
	eventBecameLeader  = "became leader"
	eventStoppedLeader = "stopped leading"
)

var _ rl.Interface = (*Lock)(nil)

// Lock is a client-go resourcelock.Interface whose record is one etcd key.
// Create one per candidate and election with New, give it to one elector,
// and Close it when the elector has returned. Each Get, Create and Update
// ends within Timings.CallTimeout, whatever its context allows.
type Lock struct {
	client   *clientv3.Client
	name     string
	key      string
	terms    string // the key whose version counts the election's terms
	identity string
	cfg      config
	logger   *zap.Logger

	// calls serialises Get, Create and Update, which read and write the
	// observation across their round trips. Lock order: calls, then mu.
	calls sync.Mutex

	mu       sync.Mutex
	observed observation      // the record as the last call saw or wrote it
	term     *term            // the current term; nil between terms
	last     *term            // the latest term started, current or ended
	led      *term            // the term of the elector's latest "became leader"
	leaders  int              // electors between their "became leader" and "stopped leading": one, unless misused
	runs     []run            // RunContext's, armed at the next "became leader"
	holder   clientv3.LeaseID // of the latest record seen not of this lock: Create waits for it to end
	read     bool             // a Get answered or a Create succeeded: Update has a version to compare
	released bool             // the last call was this lock's release: another is a no-op
	closed   bool
	cadence  cadence        // of the elector's renewals, against the lock's timings
	metrics  Metrics        // SetMetrics; nopMetrics by default
	events   *events        // SetEventRecorder; nil: events are only logged
	wg       sync.WaitGroup // term watchers and background revokes
}

// observation is what this lock last knew of the record's key.
type observation struct {
	exists bool
	modRev int64
	lease  clientv3.LeaseID
}

// New returns the lock of election name for the candidate identity, made
// for an elector with timings t (DefaultTimings: client-go's and
// controller-runtime's defaults); give the elector the same. The record's
// key is the prefix (lock.WithPrefix, default DefaultPrefix) followed by
// name. identity must be unique among the candidates, as for any client-go
// resource lock; both are at most MaxNameBytes long. opts are package
// lock's session options a Lock honours: lock.WithPrefix, WithTTL,
// WithSafetyMargin, WithCleanupTimeout and WithLogger; others fail with
// ErrInvalidOption. New checks t as client-go's NewLeaderElector does and
// against the TTL (see Timings), and the lock bounds each call by
// Timings.CallTimeout. What is the lock's own, its metrics and its event
// recorder, SetMetrics and SetEventRecorder set.
func New(client *clientv3.Client, name, identity string, t Timings, opts ...lock.SessionOption) (*Lock, error) {
	if client == nil {
		return nil, invalid("nil etcd client")
	}
	if err := lock.ValidateName(name); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	if identity == "" {
		return nil, invalid("empty identity")
	}
	if len(name) > MaxNameBytes || len(identity) > MaxNameBytes {
		return nil, invalid("name of %d bytes or identity of %d bytes: at most %d (MaxNameBytes)", len(name), len(identity), MaxNameBytes)
	}
	cfg, err := newConfig(t, opts)
	if err != nil {
		return nil, err
	}
	if cfg.margin >= cfg.ttl {
		return nil, invalid("safety margin %v must be below the TTL %v", cfg.margin, cfg.ttl)
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	return &Lock{
		client:   client,
		name:     name,
		key:      cfg.prefix + name,
		terms:    kuberecord.TermsKey(cfg.prefix + name),
		identity: identity,
		cfg:      cfg,
		metrics:  nopMetrics{},
		logger:   cfg.logger.With(zap.String("election", name), zap.String("identity", identity)),
	}, nil
}

// Timings returns the elector durations the lock was made for (New's t):
// give the elector the same.
func (l *Lock) Timings() Timings { return l.cfg.timings }

// Name returns the election's name, as given to New.
func (l *Lock) Name() string { return l.name }

// Key returns the etcd key of the record.
func (l *Lock) Key() string { return l.key }

// Identity returns the candidate's identity (resourcelock.Interface).
func (l *Lock) Identity() string { return l.identity }

// Describe names the record in the elector's logs (resourcelock.Interface).
func (l *Lock) Describe() string { return "etcd:" + l.key }

// RecordEvent logs an event of the elector (resourcelock.Interface), and
// posts it to the recorder given with SetEventRecorder. The events that
// client-go's elector records when it starts and stops leading tell the lock whether
// the elector leads (see the package doc); when it stops, the current term
// ends (ErrStoppedLeading). An elector that did not release the term
// (ReleaseOnCancel false) leaves the record in etcd until its lease
// expires, a TTL after the last renewal: followers wait for it.
//
// A lock serves one elector at a time. A second elector that starts
// leading while another leads on the same lock (two controller-runtime
// managers run at once on one ctrlmanager.Options result) would take the
// record, which carries their common identity, for its own and lead the
// same term: the lock ends that term with ErrConcurrentElectors, at once
// and for both (every RunContext of the term is canceled with it), logs
// an error, counts it (Metrics.ConcurrentElectors) and refuses any new
// term (ErrStillLeading) until every elector has stopped leading, so both
// lose the election instead of working side by side.
func (l *Lock) RecordEvent(event string) {
	l.mu.Lock()
	switch event {
	case eventBecameLeader:
		l.leaders++
		// The term client-go's next OnStartedLeading is for (Lead).
		l.led = l.last
		if l.leaders > 1 {
			l.concurrentLocked()
		}
		l.armRunsLocked()
	case eventStoppedLeader:
		l.leaders = max(l.leaders-1, 0)
		// client-go no longer leads under the term: it must not outlive
		// that. Its lease is left to expire, as an elector that did not
		// release (ReleaseOnCancel false) expects; a release revoked it
		// already.
		if t := l.term; t != nil {
			l.endLocked(t, ErrStoppedLeading, false)
		}
	}
	var token int64
	if l.last != nil {
		token = int64(l.last.token)
	}
	ev := l.events
	l.mu.Unlock()
	l.logger.Info(event, zap.Int64("token", token))
	ev.post(l.name, l.identity, event)
}

// concurrentLocked ends the current term because a second elector started
// leading on the lock. l.mu is held.
func (l *Lock) concurrentLocked() {
	var token int64
	if t := l.term; t != nil {
		token = int64(t.token)
		l.endLocked(t, ErrConcurrentElectors, true)
	}
	l.metrics.ConcurrentElectors()
	l.logger.Error("a second elector started leading on this lock while another leads: the term ends for both; run one elector (one controller-runtime manager) per lock at a time",
		zap.Int("leaders", l.leaders), zap.Int64("token", token))
}

// Get reads the record (resourcelock.Interface). A missing record is an
// error for which apierrors.IsNotFound is true. The raw bytes are the
// stored value, which differs after every write. A record that shows the
// current term is over (deleted, or under another lease) ends the term.
// A record of this identity that another lock holds (another process
// with the same identity) comes back with the holder "IDENTITY (another
// lock, etcd lease LEASE)", so that the elector waits for it to end.
func (l *Lock) Get(ctx context.Context) (*rl.LeaderElectionRecord, []byte, error) {
	l.calls.Lock()
	defer l.calls.Unlock()
	ctx, cancel := context.WithTimeout(ctx, l.cfg.timings.CallTimeout())
	defer cancel()
	if err := l.checkOpen(); err != nil {
		return nil, nil, err
	}
	resp, err := l.client.Get(ctx, l.key)
	if err != nil {
		return nil, nil, err
	}
	if len(resp.Kvs) == 0 {
		l.observe(observation{})
		return nil, nil, notFound(l.name)
	}
	kv := resp.Kvs[0]
	l.observe(observation{exists: true, modRev: kv.ModRevision, lease: clientv3.LeaseID(kv.Lease)})
	rec, err := decode(clip(l.key), kv.Value)
	if err != nil {
		return nil, nil, err
	}
	if rec.HolderIdentity == l.identity && !l.granted(clientv3.LeaseID(kv.Lease)) {
		// Another lock with this identity holds it (a restarted pod whose
		// predecessor's lease lives, or a misconfigured replica). Named as
		// this identity, client-go would take it for its own and fail an
		// Update at every retry; named as another holder, it waits.
		rec.HolderIdentity = fmt.Sprintf("%s (another lock, etcd lease %s)", l.identity, leaseHex(clientv3.LeaseID(kv.Lease)))
	}
	return rec, kv.Value, nil
}

// granted reports whether id is the lease of this lock's latest term.
func (l *Lock) granted(id clientv3.LeaseID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last != nil && l.last.lease == id
}

// Close ends the current term, revokes its lease within ctx and
// Timings.CallTimeout (the record goes with it; a revoke that does not
// complete leaves etcd to expire the lease after its TTL) and waits for
// the lock's goroutines. Every method returns
// ErrClosed after Close. Close the lock after the elector returned: a call
// still in flight when Close returns cleans up (revokes what it granted)
// before it returns.
func (l *Lock) Close(ctx context.Context) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	t := l.term
	if t != nil {
		l.endLocked(t, ErrClosed, false)
	}
	l.mu.Unlock()
	var err error
	if t != nil {
		rctx, cancel := context.WithTimeout(ctx, l.cfg.timings.CallTimeout())
		if _, err = l.client.Revoke(rctx, t.lease); errors.Is(err, rpctypes.ErrLeaseNotFound) {
			err = nil
		}
		cancel()
	}
	l.wg.Wait()
	return err
}

func (l *Lock) checkOpen() error {
	if l.client == nil {
		return invalid("a Lock must be made by New")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	return nil
}

func (l *Lock) checkHolder(ler rl.LeaderElectionRecord) error {
	if ler.HolderIdentity != l.identity {
		return fmt.Errorf("kubelock: record for holder %q given to the lock of %q", clip(ler.HolderIdentity), clip(l.identity))
	}
	return nil
}

// observe records what a call saw of the key; a key that is gone or under
// another lease ends the current term.
func (l *Lock) observe(obs observation) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.observed, l.read, l.released = obs, true, false
	if obs.exists && (l.last == nil || obs.lease != l.last.lease) {
		l.holder = obs.lease
	}
	if t := l.term; t != nil && (!obs.exists || obs.lease != t.lease) {
		l.endLocked(t, ErrRecordGone, true)
	}
}

func (l *Lock) observeRange(r *pb.RangeResponse) {
	if r == nil || len(r.Kvs) == 0 {
		l.observe(observation{})
		return
	}
	kv := r.Kvs[0]
	l.observe(observation{exists: true, modRev: kv.ModRevision, lease: clientv3.LeaseID(kv.Lease)})
}

// waitHolder returns an error wrapping ErrHolderAlive while the etcd
// lease of the latest term (latest, read from the term count; 0 if
// unknown) or of the last record seen under another holder is alive.
func (l *Lock) waitHolder(ctx context.Context, latest clientv3.LeaseID) error {
	l.mu.Lock()
	holder := l.holder
	l.mu.Unlock()
	ids := []clientv3.LeaseID{latest}
	if holder != latest {
		ids = append(ids, holder)
	}
	for _, id := range ids {
		if id == 0 {
			continue
		}
		resp, err := l.client.TimeToLive(ctx, id)
		if err != nil {
			return err
		}
		// etcd counts whole seconds, rounded down: 0 is a lease with less
		// than a second left (or expired and not yet revoked), whose
		// holder's term may still be live. Only -1, no such lease, says
		// it is gone.
		if resp.TTL >= 0 {
			return fmt.Errorf("kubelock: etcd lease %s of the record's last holder has %ds left: %w", leaseHex(id), resp.TTL, ErrHolderAlive)
		}
	}
	l.mu.Lock()
	if l.holder == holder {
		l.holder = 0
	}
	l.mu.Unlock()
	return nil
}

// describe says whose the observed record is, for errors.
func (l *Lock) describe(obs observation, t *term) string {
	switch {
	case !obs.exists:
		return "no record"
	case t == nil:
		return fmt.Sprintf("held under etcd lease %x, and this lock has no term", int64(obs.lease))
	default:
		return fmt.Sprintf("held under etcd lease %x, this term's is %x", int64(obs.lease), int64(t.lease))
	}
}

// revokeLater revokes a lease on the lock's own bounded context: in the
// background, or — once the lock is closed and its goroutines waited for —
// before it returns. l.mu must not be held.
func (l *Lock) revokeLater(id clientv3.LeaseID) {
	l.mu.Lock()
	closed := l.closed
	if !closed {
		l.revokeLaterLocked(id)
	}
	l.mu.Unlock()
	if closed {
		l.revoke(id)
	}
}

// revokeLaterLocked is revokeLater with l.mu held, for a lock not closed.
func (l *Lock) revokeLaterLocked(id clientv3.LeaseID) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		l.revoke(id)
	}()
}

func (l *Lock) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.cleanup)
	defer cancel()
	if _, err := l.client.Revoke(ctx, id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		l.logger.Warn("lease revoke failed; etcd expires it", zap.String("lease", leaseHex(id)), zap.Error(err))
	}
}
