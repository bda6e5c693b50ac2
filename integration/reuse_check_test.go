package integration

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// Invariants, one counter each (see reuseResult.counters).
const (
	invOverlap    = "overlapping holders"        // 1
	invLateNotice = "deletions noticed late"     // 1
	invRegression = "token regressions"          // 2
	invShared     = "tokens handed out twice"    // 2
	invForeign    = "deletes of an active grant" // 3
	invLeak       = "leaked goroutines"          // 4
	invLeftover   = "keys left after close"      // 5
	invLockDelay  = "lock-delays cut short"      // 6
	invTenure     = "tenure keys cut short"      // 6
)

var reuseInvariants = []string{invOverlap, invLateNotice, invRegression, invShared, invForeign, invLeak, invLeftover, invLockDelay, invTenure}

// reuseInvariantNumber is each counter's invariant, as numbered on reuseResult.
var reuseInvariantNumber = map[string]int{invOverlap: 1, invLateNotice: 1, invRegression: 2, invShared: 2, invForeign: 3, invLeak: 4, invLeftover: 5, invLockDelay: 6, invTenure: 6}

// reuseResult is what one run found. Its invariants:
//
//  1. At most one holder ACTIVE per name: believed-ACTIVE intervals (from
//     the acquisition's return to the Release call or the library's loss
//     notice) never overlap, except that a holder whose key the operator
//     deleted (or whose lease it revoked) may overlap the next holder by at
//     most noticeBound — not an election's term, whose successor waits for
//     its end; and every deletion of a held key by someone else is noticed
//     by its holder within noticeBound.
//  2. Tokens of successive grants of a name strictly increase, and no
//     token is handed to two grants (acquisitions or terms, on any name).
//  3. A held key is deleted only by its own Release, its session's Close
//     (or Abandon and expiry), or the operator: every DELETE seen by the
//     observer is attributed to the grant that owned the key (key and
//     create revision = token).
//  4. No goroutine of the library or of the checker outlives the run.
//  5. No key is left under the prefix once every session is closed, but
//     the lock-delay markers of unclean ends and of acquisitions that
//     failed on a session lost, abandoned or not closed cleanly (and
//     delay keys and records), and election tenure keys for at most a
//     TTL and a bit; and a Release that returned nil left no key of its
//     grant (read back at once).
//  6. On a lock-delay name (see reuseConfig.delayed), no grant starts
//     less than the delay after an unclean end of the previous one —
//     any deletion of its key but by its own Release or its session's
//     Close called before it (an operator's delete or Break, the expiry
//     of a lost or abandoned session's lease) — as etcd's own watch of
//     the deletion times it, whatever the ending session does next. On
//     the election's name, a term's tenure key is deleted only after the
//     term's context ended, and the next term starts only once it is
//     gone, as the observer's watch times its deletion (less
//     tenureRoom), however the term ended.
type reuseResult struct {
	seed       uint64
	control    string
	took       time.Duration
	controlled bool // the control met its hazard
	stats      map[string]int
	counters   map[string]int           // per invariant
	first      map[string]time.Duration // first violation of each, on the run's clock
	maxNotice  time.Duration            // slowest notice of a deleted held key
	// signatures counts the violations by what they looked like, with the
	// first time each was seen: which bug a finding points at.
	signatures map[string]int
	sigFirst   map[string]time.Duration
	grants     int
	deletions  int

	// uncleanEnds counts the unclean ends of lock-delay names; delayed,
	// the grants that followed one, of which minDelay is the shortest
	// wait.
	uncleanEnds, delayed int
	minDelay             time.Duration
	// followedTerms counts the election terms another term followed,
	// checked against their tenure keys.
	followedTerms int

	leakedGoroutines int      // measured by runReuse
	left             []string // keys under the prefix after the run
}

func (r reuseResult) violations() int {
	n := 0
	for _, v := range r.counters {
		n += v
	}
	return n
}

func (r reuseResult) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed=%d control=%q took=%v grants=%d deletions=%d max-notice=%v", r.seed, r.control,
		r.took.Round(time.Millisecond), r.grants, r.deletions, r.maxNotice.Round(time.Millisecond))
	for _, inv := range reuseInvariants {
		fmt.Fprintf(&b, " %q=%d", inv, r.counters[inv])
		if at, ok := r.first[inv]; ok {
			fmt.Fprintf(&b, "(first at %v)", at.Round(time.Millisecond))
		}
	}
	fmt.Fprintf(&b, " unclean-ends=%d next-holders=%d shortest-wait=%v followed-terms=%d", r.uncleanEnds, r.delayed, r.minDelay.Round(time.Millisecond), r.followedTerms)
	fmt.Fprintf(&b, " stats=%v", r.stats)
	for _, sig := range slices.Sorted(maps.Keys(r.signatures)) {
		fmt.Fprintf(&b, "\n  found %q ×%d, first at %v", sig, r.signatures[sig], r.sigFirst[sig].Round(time.Millisecond))
	}
	return b.String()
}

// caught reports whether the invariant a control is built to break caught it.
func (r reuseResult) caught() bool {
	switch r.control {
	case reuseIgnoreLost:
		// Invariant 1 either way: a holder that ignores its loss overlaps
		// the next holder, or — when no one acquired in time — believes
		// itself active long after its key was deleted.
		return r.counters[invOverlap] > 0 || r.counters[invLateNotice] > 0
	case reuseReleaseByName:
		return r.counters[invForeign] > 0
	case reuseStaleToken:
		return r.counters[invShared] > 0
	case reuseForgetClose:
		return r.counters[invLeftover] > 0 && r.counters[invLeak] > 0
	case reuseSkipDelay:
		return r.counters[invLockDelay] > 0
	case reusePartialSet:
		// The phantom name overlaps its real holder; when that holder
		// lost it early, the phantom's older token may show up first.
		return r.counters[invOverlap] > 0 || r.counters[invRegression] > 0
	case reuseOverLimit, reuseReaderAsWriter:
		return r.counters[invOverlap] > 0
	}
	return false
}

// violation counts one violation of inv, of the given signature, found at
// the run's time at.
func (c *reuseRun) violation(res *reuseResult, inv, sig string, at time.Duration, format string, args ...any) {
	res.counters[inv]++
	if first, ok := res.first[inv]; !ok || at < first {
		res.first[inv] = at
	}
	sig = inv + ": " + sig
	res.signatures[sig]++
	if first, ok := res.sigFirst[sig]; !ok || at < first {
		res.sigFirst[sig] = at
	}
	if res.counters[inv] <= 5 || res.signatures[sig] == 1 {
		c.t.Logf("violation (%s) at %v: %s", sig, at.Round(time.Millisecond), fmt.Sprintf(format, args...))
	}
}

// check runs every invariant's check on the finished run.
func (c *reuseRun) check(res *reuseResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	res.counters, res.first = map[string]int{}, map[string]time.Duration{}
	res.signatures, res.sigFirst = map[string]int{}, map[string]time.Duration{}
	res.controlled, res.grants, res.deletions = c.controlled, len(c.grants), len(c.deletions)
	res.stats = maps.Clone(c.stats)
	res.counters[invLeak] = res.leakedGoroutines
	if res.leakedGoroutines > 0 {
		res.first[invLeak] = res.took
	}
	for _, g := range c.grants {
		if g.end < 0 {
			g.end = res.took
		}
	}
	c.attributeDeletions(res)
	c.checkOverlaps(res)
	c.checkTokens(res)
	unclean := c.checkLockDelay(res)
	c.checkTenures(res)
	c.checkLeftovers(res, unclean)
}

// cleanEnd reports whether g's key, deleted by d, was deleted by g's own
// Release or its session's Close, called before the session was
// abandoned, and by no operator: an operator's delete that races the
// Release and wins is an unclean end, whichever call came first; after
// Abandon the end is unclean whatever follows (a Close, a Release). etcd
// settles the Release's race where it can: a Release deletes the key and
// its marker in one transaction, so a marker deleted at the key's
// deletion's revision says the Release won (an operator's delete or a
// Break's revoke never touch markers). Otherwise the calls tell: a
// Release that returned nil, or a Close that did. A Release that failed,
// with the session abandoned before a retry, leaves the key to expire
// with the lease: an unclean end.
func (c *reuseRun) cleanEnd(g *grant, d deletion, markerDeleted map[fencing.Token]int64) bool {
	rev, markerGone := markerDeleted[g.real]
	if markerGone && rev == d.modRev {
		return true
	}
	// A marker deleted before the key went was deleted by a clean end
	// while the key still existed: Close, which ends its locks before it
	// deletes their markers (an operator's delete that lands between that
	// and the revoke comes after the end), or the session's next
	// acquisition of the name replacing the key. A next holder deletes
	// markers only once the key is gone; operators never do.
	if markerGone && rev < d.modRev && !g.session.abandoned {
		return true
	}
	if g.deletedBy != "" || len(c.racing(g, d.at)) > 0 {
		return false
	}
	if g.releasedOK && g.release >= 0 && g.release <= d.at {
		return true
	}
	closed := g.session.closed >= 0 && g.session.closed <= d.at && !g.session.abandoned
	return closed && g.session.revoked
}

// racing are the operator's actions, called before at, that may have
// deleted g's key: a delete of it, or a Break that revoked its lease.
func (c *reuseRun) racing(g *grant, at time.Duration) []opAction {
	var as []opAction
	for _, a := range c.actions {
		if a.call <= at && (a.key == g.key && a.createRev == int64(g.real) || a.kind == "break" && a.lease == g.lease) {
			as = append(as, a)
		}
	}
	return as
}

// checkLockDelay checks invariant 6 on the lock-delay names and returns
// the tokens of their grants that ended uncleanly.
func (c *reuseRun) checkLockDelay(res *reuseResult) map[fencing.Token]bool {
	owners := map[keyToken]*grant{}
	for _, g := range c.grants {
		if c.cfg.delayed(g.name) {
			owners[keyToken{g.key, g.real}] = g
		}
	}
	byName := c.byName()
	markerDeleted := map[fencing.Token]int64{}
	for _, d := range c.deletions {
		if _, tok, ok := markerOf(d.key); ok {
			markerDeleted[tok] = d.modRev
		}
	}
	unclean := map[fencing.Token]bool{}
	for _, d := range c.deletions {
		g := owners[keyToken{d.key, fencing.Token(d.createRev)}]
		if g == nil || c.cleanEnd(g, d, markerDeleted) {
			continue
		}
		unclean[g.real] = true
		res.uncleanEnds++
		for _, h := range byName[g.name] {
			if h == g || h.start < d.at {
				continue
			}
			// The first grant after the end: the next holder.
			wait := h.start - d.at
			if res.delayed == 0 || wait < res.minDelay {
				res.minDelay = wait
			}
			res.delayed++
			if want := c.cfg.lockDelay; wait < want {
				c.violation(res, invLockDelay, "next holder too soon", h.start, "%v started %v after the unclean end of %v (its key deleted at %v, revision %d; its marker deleted at revision %d; released at %v; operator actions before: %+v), want >= %v",
					h, wait, g, d.at, d.modRev, markerDeleted[g.real], g.release, c.racing(g, d.at), want)
			}
			break
		}
	}
	return unclean
}

// tenureRoom is how much earlier than the observer's watch a term may see
// the tenure key before it deleted: its own watch, served beside the
// observer's, may deliver the deletion first.
const tenureRoom = 250 * time.Millisecond

// checkTenures checks invariant 6 on the election's terms: a term's
// tenure key is not deleted while the term is active, and the next term
// starts only once it is gone.
func (c *reuseRun) checkTenures(res *reuseResult) {
	gone := map[fencing.Token]deletion{}
	for _, d := range c.deletions {
		if tok, ok := tenureOf(d.key); ok {
			gone[tok] = d
		}
	}
	for _, gs := range c.byName() {
		var terms []*grant
		for _, g := range gs {
			if g.kind == "term" && g.token == g.real {
				terms = append(terms, g)
			}
		}
		for i, g := range terms {
			d, deleted := gone[g.real]
			if deleted && d.at < g.end {
				c.violation(res, invTenure, "tenure key gone while its term was active", d.at,
					"the tenure key %s of %v was deleted at %v (revision %d), before the term's context ended", d.key, g, d.at, d.modRev)
			}
			if i+1 == len(terms) {
				continue
			}
			h := terms[i+1]
			res.followedTerms++
			switch {
			case !deleted:
				c.violation(res, invTenure, "next term while the tenure key was there", h.start,
					"%v started after %v, whose tenure key was never seen deleted", h, g)
			case h.start < d.at-tenureRoom:
				c.violation(res, invTenure, "next term before the tenure key was gone", h.start,
					"%v started %v before the tenure key %s of %v was deleted (at %v, revision %d; the term ended at %v)",
					h, d.at-h.start, d.key, g, d.at, d.modRev, g.end)
			}
		}
	}
}

// checkLeftovers checks invariant 5: a lock-delay marker may stay only
// for a grant that ended uncleanly, or an acquisition that never became
// a grant (its session was lost or abandoned while it waited out a
// delay); a delay key expires with its lease.
func (c *reuseRun) checkLeftovers(res *reuseResult, unclean map[fencing.Token]bool) {
	granted := map[fencing.Token]*grant{}
	for _, g := range c.grants {
		granted[g.real] = g
	}
	for _, g := range c.grants {
		if g.keptByRelease {
			c.violation(res, invLeftover, "a key kept by a Release that returned nil", g.release, "%v", g)
		}
	}
	for _, key := range res.left {
		if tok, ok := tenureOf(key); ok {
			c.violation(res, invLeftover, "a tenure key left past its lease's TTL", res.took, "%s of %v", key, granted[tok])
			continue
		}
		if !lockDelayKey(key) {
			c.violation(res, invLeftover, "", res.took, "%s", key)
			continue
		}
		lease, tok, isMarker := markerOf(key)
		g := granted[tok]
		if isMarker && g == nil && c.cleanlyFailed(lease, tok) {
			c.violation(res, invLeftover, "a lock-delay marker of a failed acquisition, after a clean Close", res.took, "%s", key)
			continue
		}
		if !isMarker || unclean[tok] || g == nil {
			res.stats["lock-delay keys left"]++
			continue
		}
		var deleted []string
		for _, d := range c.deletions {
			if d.key == g.key && fencing.Token(d.createRev) == g.real {
				deleted = append(deleted, d.at.String())
			}
		}
		c.violation(res, invLeftover, "a lock-delay marker of a clean end", res.took, "%s of %v (session closed %v, abandoned %t; key deleted at %v)",
			key, g, g.session.closed, g.session.abandoned, deleted)
	}
}

// cleanlyFailed reports whether a marker of lease and token tok, of no
// grant, is of an acquisition that failed cleanly: its session was
// closed by a Close that returned nil, never lost or abandoned, and no
// operator deleted its key or broke its lease. Its clean-up or, failing
// that, Close must have deleted it.
func (c *reuseRun) cleanlyFailed(lease clientv3.LeaseID, tok fencing.Token) bool {
	for _, a := range c.actions {
		if a.kind == "break" && a.lease == lease || a.kind == "delete" && a.createRev == int64(tok) && leaseOfKey(a.key) == lease {
			return false
		}
	}
	for _, rec := range c.sessions {
		if rec.lease == lease {
			return rec.revoked && !rec.abandoned && !rec.lost
		}
	}
	return false
}

// lockDelayKey reports whether key is a lock-delay marker or delay key.
func lockDelayKey(key string) bool {
	return strings.Contains(key, "%held/") || strings.Contains(key, "%delay/") || strings.Contains(key, "%delayed/")
}

// tenureOf is the token of the term whose tenure key is key,
// <name>%tenure/<lease-hex>-<token-hex>; ok is false for another key.
func tenureOf(key string) (tok fencing.Token, ok bool) {
	i := strings.Index(key, "%tenure/")
	if i < 0 {
		return 0, false
	}
	_, tokHex, ok := strings.Cut(key[i+len("%tenure/"):], "-")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(tokHex, 16, 64)
	return fencing.Token(v), err == nil
}

// markerOf is the lease and the token of the acquisition that wrote the
// marker key <name>%held/<lease-hex>-<token-hex>; ok is false for another
// key.
func markerOf(key string) (lease clientv3.LeaseID, tok fencing.Token, ok bool) {
	i := strings.Index(key, "%held/")
	if i < 0 {
		return 0, 0, false
	}
	hex, tokHex, ok := strings.Cut(key[i+len("%held/"):], "-")
	if !ok {
		return 0, 0, false
	}
	v, err := strconv.ParseInt(tokHex, 16, 64)
	if err != nil {
		return 0, 0, false
	}
	l, _ := strconv.ParseInt(hex, 16, 64) // 0, no session's, if it does not parse
	return clientv3.LeaseID(l), fencing.Token(v), true
}

type keyToken struct {
	key   string
	token fencing.Token
}

// attributeDeletions gives every DELETE to the grant that owned the key
// (invariant 3) and checks that its holder noticed it in time (invariant 1).
func (c *reuseRun) attributeDeletions(res *reuseResult) {
	owners := map[keyToken][]*grant{}
	for _, g := range c.grants {
		kt := keyToken{g.key, g.real}
		owners[kt] = append(owners[kt], g)
	}
	for _, d := range c.deletions {
		gs := owners[keyToken{d.key, fencing.Token(d.createRev)}]
		if len(gs) == 0 {
			continue // a waiter's key, or an attempt that failed
		}
		g := gs[0]
		for _, o := range gs[1:] {
			if o.start <= d.at {
				g = o
			}
		}
		ops := c.racing(g, d.at)
		byOperator := len(ops) > 0
		// An operator's delete whose reply said it deleted this key, or
		// a Force that deleted a key of the same lease and then revoked
		// it, called while its holder still believed in it, is what
		// deleted it, however late the observer saw the DELETE: the
		// holder's own release or close, called meanwhile, found the key
		// gone, and its session may hear of the revoke first.
		i := slices.IndexFunc(ops, func(a opAction) bool { return deletedBy(a, g) })
		opDeleted := i >= 0
		if opDeleted {
			ops = ops[i:]
		}
		// Deleted after its holder stopped believing in it: a release, a
		// close, the expiry of a lost session's lease, or — for one name
		// of a set lost by the deletion of another's key — the library's
		// clean-up of the set's other keys. Not an operator's delete of
		// the set's own key that caused the loss: the observer may see it
		// after the library did.
		if !opDeleted && g.end < d.at && g.start <= d.at && (!errors.Is(g.lostBy, lock.ErrKeyDeleted) || g.set != 0 && !byOperator) {
			continue
		}
		if !opDeleted && (g.release >= 0 && g.release <= d.at || g.session.closed >= 0 && g.session.closed <= d.at) {
			continue
		}
		at, by, call := d.at, "foreign", d.at
		if byOperator {
			at, by, call = min(at, ops[0].ret), "operator", ops[0].call
		}
		g.deletedAt, g.deletedBy, g.deleteCall = at, by, call
		if by == "foreign" {
			sig := "by someone else"
			if gs[0] != g {
				sig = "by the retried release of an earlier grant with the same token"
			}
			c.violation(res, invForeign, sig, d.at, "key %s (token %d) deleted at revision %d while active, by no release, close or operator of its grant %v",
				d.key, d.createRev, d.modRev, g)
		}
		notice := g.end - at
		res.maxNotice = max(res.maxNotice, notice)
		if notice > noticeBound {
			sig := "noticed late"
			if g.lostBy == nil {
				sig = "never noticed"
			}
			c.violation(res, invLateNotice, sig, at+noticeBound, "%v still believed active %v after its key was deleted (%s, at %v)",
				g, notice.Round(time.Millisecond), by, at.Round(time.Millisecond))
		}
	}
}

// deletedBy reports whether the operator's action a certainly deleted g's
// key while g was believed active: a delete or Force of the key itself
// whose reply said it deleted it, or a Force of another key of g's lease,
// whose revoke, sent once the delete succeeded, deletes every key of the
// lease.
func deletedBy(a opAction, g *grant) bool {
	if !a.deleted || g.end >= 0 && a.call >= g.end {
		return false
	}
	own := a.key == g.key && a.createRev == int64(g.real)
	return own || a.kind == "break" && a.lease != 0 && a.lease == g.lease
}

// checkOverlaps checks invariant 1 on every pair of grants of a name: of
// a read-write lock, two readers may overlap; of a semaphore, at most
// reuseLimit grants may be active at once (checkLimit).
func (c *reuseRun) checkOverlaps(res *reuseResult) {
	for name, gs := range c.byName() {
		if kindOf(name) == kindSemaphoreName {
			c.checkLimit(res, gs)
			continue
		}
		for i, a := range gs {
			for _, b := range gs[i+1:] {
				if b.start >= a.end || a.shared && b.shared {
					continue
				}
				// Excused: the time both believed, if it ended within the
				// notice bound after the operator deleted the key of the
				// one that believed too long.
				// Not an election's terms: the next one starts only after
				// the old one's context ended, however it ended.
				both := min(a.end, b.end)
				terms := a.kind == "term" && b.kind == "term"
				excused := !terms && (excused(a, b) || b.stale() && both <= b.deletedAt+noticeBound)
				if overlap := both - b.start; overlap > 0 && !excused {
					sig := map[string]string{"operator": "after an operator's delete", "foreign": "after a foreign delete", "": "with no delete"}[a.deletedBy]
					// Exact times: an overlap under a millisecond must be
					// told apart from a rounding artefact.
					c.violation(res, invOverlap, sig, b.start, "%v and %v active together for %v (first ends %v, second starts %v; first's key deleted by %q at %v; operator's calls on it: %v)",
						a, b, overlap, a.end, b.start, a.deletedBy, a.deletedAt, c.actionsOn(a))
				}
			}
		}
	}
}

// actionsOn lists the operator's calls on g's key, for a report.
func (c *reuseRun) actionsOn(g *grant) []string {
	var as []string
	for _, a := range c.racing(g, math.MaxInt64) {
		as = append(as, fmt.Sprintf("%s [%v, %v] deleted=%v", a.kind, a.call, a.ret, a.deleted))
	}
	return as
}

// excused reports whether a, active until after b started, may have
// overlapped b: the operator deleted a's key before b started (the call
// came first: b can own the name only once the key is gone) and the
// overlap ended within the notice bound.
func excused(a, b *grant) bool {
	both := min(a.end, b.end)
	return a.deletedBy == "operator" && a.deleteCall <= b.start && both <= a.deletedAt+noticeBound
}

// checkLimit checks invariant 1 on a semaphore's grants, in the order
// they started: when one starts, fewer than reuseLimit others are active.
func (c *reuseRun) checkLimit(res *reuseResult, gs []*grant) {
	for i, b := range gs {
		if b.stale() {
			continue
		}
		var active []*grant
		for _, a := range gs[:i] {
			if a.end > b.start && !excused(a, b) {
				active = append(active, a)
			}
		}
		if len(active) >= reuseLimit {
			c.violation(res, invOverlap, "more holders than the semaphore's limit", b.start, "%v started while %d others were active: %v", b, len(active), active)
		}
	}
}

// checkTokens checks invariant 2.
func (c *reuseRun) checkTokens(res *reuseResult) {
	seen := map[fencing.Token]*grant{}
	for _, g := range c.grants {
		if o, ok := seen[g.token]; ok && (g.set == 0 || o.set != g.set) {
			sig := "across sessions"
			switch {
			case o.kind == "term" && g.kind == "term" && o.worker == g.worker:
				sig = "next election term of the same elector"
			case o.session == g.session && o.key == g.key:
				sig = "next acquisition of the same session"
			}
			c.violation(res, invShared, sig, g.start, "token %v handed to %v and again to %v", g.token, o, g)
			continue
		}
		seen[g.token] = g
	}
	for _, gs := range c.bySequence() {
		// A reader's token rises above every writer's before it, a
		// writer's above every grant's before it; concurrent readers'
		// tokens are in no order.
		var high, highWriter *grant
		for _, g := range gs {
			if g.stale() {
				continue
			}
			bound := high
			if g.shared {
				bound = highWriter
			}
			if bound != nil && g.token < bound.token {
				c.violation(res, invRegression, "", g.start, "%v after %v", g, bound)
			}
			if high == nil || g.token > high.token {
				high = g
			}
			if !g.shared && (highWriter == nil || g.token > highWriter.token) {
				highWriter = g
			}
		}
	}
}

// bySequence returns the grants whose tokens must rise, each sequence in
// the order its grants started: those of a name, or of a semaphore's slot
// (its grants' keys are slot keys).
func (c *reuseRun) bySequence() map[string][]*grant {
	out := map[string][]*grant{}
	for name, gs := range c.byName() {
		for _, g := range gs {
			seq := name
			if kindOf(name) == kindSemaphoreName {
				seq = g.key
			}
			out[seq] = append(out[seq], g)
		}
	}
	return out
}

// byName returns the grants of each name in the order they started.
func (c *reuseRun) byName() map[string][]*grant {
	out := map[string][]*grant{}
	for _, g := range c.grants {
		out[g.name] = append(out[g.name], g)
	}
	for _, gs := range out {
		slices.SortStableFunc(gs, func(a, b *grant) int { return int(a.start - b.start) })
	}
	return out
}
