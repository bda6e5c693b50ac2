package integration

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// grant is one acquisition (Acquire, TryAcquire) or election term, with
// the holder's believed-ACTIVE interval on the run's clock.
type grant struct {
	id        int
	kind      string // "acquire", "try", "term"
	worker    string // "w0", "e1", ...
	client    int
	session   *sessionRec
	name, key string
	lease     clientv3.LeaseID
	token     fencing.Token // as reported to the checker
	real      fencing.Token // as the library returned it
	start     time.Duration
	end       time.Duration // -1 while believed active
	due       time.Duration // when the worker means to release it
	release   time.Duration // first Release/Resign call, -1 if none
	// releasedOK: a Release (or Resign) of it returned nil.
	releasedOK bool
	// keptByRelease: its key was still there, read back right after a
	// Release that returned nil.
	keptByRelease bool
	lostBy        error         // why the library ended it, if it was lost
	deletedAt     time.Duration // the deletion of its key while active, -1 if none
	deletedBy     string        // "operator", "foreign"
	// deleteCall is when the operator's call that deleted the key began
	// (the deletion's time for a foreign one).
	deleteCall time.Duration
	shared     bool // a reader of a read-write lock
	set        int  // the AcquireAll it is one name of, 0 if none
}

// sessionRec is one lock.Session of a worker, or one elector's life.
type sessionRec struct {
	worker string
	lease  clientv3.LeaseID
	closed time.Duration // Close, Abandon or the elector's stop, -1 if none
	// abandoned: ended by Abandon, whose keys stay until the lease
	// expires (an unclean end).
	abandoned bool
	s         *lock.Session // nil for electors
	// revoked: a Close returned nil, so its keys must be gone. A failed
	// Close leaves them to expire with the lease.
	revoked bool
	// lost: the library ended it with ErrSessionLost before it was
	// closed (an unclean end of all it held or waited for).
	lost bool
}

// opAction is one operator action on a held key.
type opAction struct {
	kind      string // "delete" or "break"
	key       string
	createRev int64            // the key deleted (raw delete)
	lease     clientv3.LeaseID // the lease revoked (break)
	call, ret time.Duration
	deleted   bool // key (createRev) certainly deleted by this call: its reply said so
}

// deletion is one DELETE seen by the observer's watch on the prefix.
type deletion struct {
	key       string
	createRev int64
	modRev    int64
	at        time.Duration
}

func (r *reuseRun) count(stat string) {
	r.mu.Lock()
	r.stats[stat]++
	r.mu.Unlock()
}

func (r *reuseRun) addSession(worker string, s *lock.Session) *sessionRec {
	rec := &sessionRec{worker: worker, lease: s.Lease(), closed: -1, s: s}
	r.mu.Lock()
	r.sessions = append(r.sessions, rec)
	r.stats["sessions"]++
	r.mu.Unlock()
	return rec
}

// closeSession records the end of a session (its grants end with it, as
// Close and Abandon release every lock the session holds).
func (r *reuseRun) closeSession(rec *sessionRec, at time.Duration, abandon bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec.closed < 0 {
		rec.closed, rec.abandoned = at, abandon
	}
	for _, g := range r.grants {
		if g.session == rec && g.end < 0 {
			g.end = at
		}
	}
}

// holders returns how many grants of name are believed active.
func (r *reuseRun) holders(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, g := range r.grants {
		if g.end < 0 && g.name == name {
			n++
		}
	}
	return n
}

// heldByOthers returns a plain name, and its key, that a worker other
// than worker believes it holds and means to hold until at least until,
// and that skip does not rule out; "" if none.
func (r *reuseRun) heldByOthers(worker string, until time.Duration, skip func(name string) bool) (name, key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, g := range r.grants {
		if g.end < 0 && g.due >= until && g.worker != worker && g.kind != "term" && kindOf(g.name) == kindPlainName && !skip(g.name) {
			return g.name, g.key
		}
	}
	return "", ""
}

// closed records the outcome of a session's Close.
func (r *reuseRun) closed(rec *sessionRec, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		rec.revoked = true
	} else {
		r.stats["session closes that failed"]++
	}
}

// granted records a new grant, active from start.
func (r *reuseRun) granted(kind, worker string, client int, rec *sessionRec, name, key string, token fencing.Token, start, due time.Duration) *grant {
	return r.grantedAs(kind, worker, client, rec, name, key, token, start, due, false, 0)
}

// grantedAs is granted for a reader (shared) or one name of a set.
func (r *reuseRun) grantedAs(kind, worker string, client int, rec *sessionRec, name, key string, token fencing.Token, start, due time.Duration, shared bool, set int) *grant {
	r.mu.Lock()
	defer r.mu.Unlock()
	lease := leaseOfKey(key)
	if rec != nil {
		lease = rec.lease // a semaphore's slot key does not name it
	}
	g := &grant{id: len(r.grants), kind: kind, worker: worker, client: client, session: rec, name: name, key: key,
		lease: lease, token: token, real: token, start: start, end: -1, due: due, release: -1, deletedAt: -1, shared: shared, set: set}
	r.grants = append(r.grants, g)
	r.stats["grants: "+kind]++
	if kind != "term" {
		r.stats["grants of a "+g.lockKind()]++
	}
	return g
}

// ended fixes the end of g's believed-ACTIVE interval: at, or earlier if
// the library declared the lock lost before (err is Lock.Err or the term's
// context cause) and the worker heeds it.
func (r *reuseRun) ended(g *grant, at time.Duration, err error, heedLoss bool) {
	var lost *lock.LostError
	isLost := errors.As(err, &lost)
	r.mu.Lock()
	defer r.mu.Unlock()
	if isLost {
		g.lostBy = lost.Cause
		if l := lost.At.Sub(r.t0); heedLoss && l < at {
			at = l
		}
	}
	if g.end < 0 {
		g.end = at
	}
}

// releasing records g's own Release (or Resign) call at at, which ends its
// believed-ACTIVE interval.
func (r *reuseRun) releasing(g *grant, at time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if g.release < 0 {
		g.release = at
	}
	if g.end < 0 {
		g.end = at
	}
}

// releasedOK records that a Release (or Resign) of each of gs returned
// nil, called while its session was not abandoned (after Abandon a
// Release returns nil and deletes nothing), and reads each key back: a
// Release that returned nil must have deleted it (keptByRelease).
func (r *reuseRun) releasedOK(gs ...*grant) {
	r.mu.Lock()
	var check []*grant
	for _, g := range gs {
		if !g.session.abandoned {
			g.releasedOK = true
			check = append(check, g)
		}
	}
	r.mu.Unlock()
	for _, g := range check {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		get, err := r.obs.Get(ctx, g.key)
		cancel()
		if err == nil && len(get.Kvs) > 0 && get.Kvs[0].CreateRevision == int64(g.real) {
			r.mu.Lock()
			g.keptByRelease = true
			r.mu.Unlock()
		}
	}
}

func (g *grant) String() string {
	release := "none"
	if g.release >= 0 {
		release = g.release.Round(time.Millisecond).String()
	}
	kind := g.kind
	switch {
	case g.shared:
		kind += " (reader)"
	case g.set > 0:
		kind += fmt.Sprintf(" (set %d)", g.set)
	}
	return fmt.Sprintf("%s %s %s(%s) token %v [%v, %v] release %s lost %v", g.worker, kind, g.name, g.key, g.token,
		g.start.Round(time.Millisecond), g.end.Round(time.Millisecond), release, g.lostBy)
}

// lockKind names the kind of lock g is a grant of.
func (g *grant) lockKind() string {
	switch {
	case g.set != 0:
		return "set (AcquireAll), per name"
	case g.shared:
		return "read-write lock: reader"
	}
	return map[int]string{kindPlainName: "mutex", kindDelayName: "mutex with a lock-delay",
		kindSemaphoreName: "semaphore", kindRWName: "read-write lock: writer"}[kindOf(g.name)]
}

// stale reports whether g's key was deleted by the operator before g even
// started: a grant that was never the owner at any revision.
func (g *grant) stale() bool { return g.deletedBy == "operator" && g.deletedAt <= g.start }

// leaseOfKey parses the lease ID from a contender key <prefix><name>/<lease-hex>.
func leaseOfKey(key string) clientv3.LeaseID {
	v, err := strconv.ParseInt(key[strings.LastIndexByte(key, '/')+1:], 16, 64)
	if err != nil {
		return 0
	}
	return clientv3.LeaseID(v)
}
