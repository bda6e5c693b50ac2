package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// TestReuseCheckerExcusesAnOperatorsDeleteSeenLate checks the checker on
// a history it once misjudged: an operator deletes one name's key of a
// set; another worker takes the name; the set's holder hears of the loss
// within the notice bound; the observer sees the delete only after that.
// The overlap is the operator's doing, as for a single lock. Without the
// operator's action, the same history is an overlap nobody explains.
func TestReuseCheckerExcusesAnOperatorsDeleteSeenLate(t *testing.T) {
	t.Parallel()
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	history := func(withOperator bool) reuseResult {
		s1, s2 := &sessionRec{worker: "w1", lease: 0x11, closed: -1}, &sessionRec{worker: "w2", lease: 0x22, closed: -1}
		set := &grant{kind: "acquire", worker: "w1", session: s1, name: "b", key: "/p/b/11", lease: 0x11, token: 10, real: 10,
			start: ms(0), end: ms(100), release: ms(120), lostBy: lock.ErrKeyDeleted, deletedAt: -1, set: 1}
		next := &grant{kind: "acquire", worker: "w2", session: s2, name: "b", key: "/p/b/22", lease: 0x22, token: 12, real: 12,
			start: ms(98), end: ms(150), release: ms(150), deletedAt: -1}
		c := &reuseRun{t: t, grants: []*grant{set, next}, sessions: []*sessionRec{s1, s2},
			deletions: []deletion{{key: set.key, createRev: 10, modRev: 11, at: ms(101)}}}
		if withOperator {
			c.actions = []opAction{{kind: "delete", key: set.key, createRev: 10, call: ms(95), ret: ms(97)}}
		}
		res := reuseResult{took: ms(200)}
		c.check(&res)
		return res
	}
	if got := history(true).counters[invOverlap]; got != 0 {
		t.Errorf("operator's delete seen after the loss: %d overlap violations, want 0", got)
	}
	if got := history(false).counters[invOverlap]; got != 1 {
		t.Errorf("no operator: %d overlap violations, want 1 (an unexplained overlap)", got)
	}
}

// TestReuseCheckerExcusesAnOperatorsDeleteBeforeARelease checks the
// checker on a history it once misjudged (CI, seed 4): an operator
// deletes a holder's key; the next contender gets the name; the holder,
// not yet told of the loss, releases within the notice bound; the
// observer sees the DELETE only after the release was called. For a lock,
// the operator's delete, whose reply said it deleted the key, is what
// ended the hold, not the release. Without it the same history is an
// overlap nobody explains; with a delete that may not have happened (its
// reply lost), the release is taken for the deleter, as before. For an
// election's terms nothing excuses it: the next term waits until the old
// one's tenure key is gone, which outlives its context.
func TestReuseCheckerExcusesAnOperatorsDeleteBeforeARelease(t *testing.T) {
	t.Parallel()
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	history := func(kind string, actions ...opAction) reuseResult {
		s1, s2 := &sessionRec{worker: "e1", lease: 0x11, closed: -1}, &sessionRec{worker: "e0", lease: 0x22, closed: -1}
		held := &grant{kind: kind, worker: "e1", session: s1, name: "leader", key: "/p/leader/11", lease: 0x11, token: 10, real: 10,
			start: ms(0), end: ms(100), release: ms(100), deletedAt: -1}
		next := &grant{kind: kind, worker: "e0", session: s2, name: "leader", key: "/p/leader/22", lease: 0x22, token: 12, real: 12,
			start: ms(98), end: ms(150), release: ms(150), deletedAt: -1}
		c := &reuseRun{t: t, grants: []*grant{held, next}, sessions: []*sessionRec{s1, s2}, actions: actions,
			deletions: []deletion{{key: held.key, createRev: 10, modRev: 11, at: ms(101)}, {key: next.key, createRev: 12, modRev: 13, at: ms(151)}}}
		res := reuseResult{took: ms(200)}
		c.check(&res)
		return res
	}
	del := opAction{kind: "delete", key: "/p/leader/11", createRev: 10, call: ms(95), ret: ms(97), deleted: true}
	if res := history("mutex", del); res.counters[invOverlap] != 0 || res.counters[invLateNotice] != 0 {
		t.Errorf("operator's delete, then the release: %v; want no violation", res.counters)
	}
	if got := history("mutex").counters[invOverlap]; got != 1 {
		t.Errorf("no operator: %d overlap violations, want 1 (an unexplained overlap)", got)
	}
	maybe := del
	maybe.deleted = false
	if got := history("mutex", maybe).counters[invOverlap]; got != 1 {
		t.Errorf("an operator's delete that may not have happened: %d overlap violations, want 1", got)
	}
	if got := history("term", del).counters[invOverlap]; got != 1 {
		t.Errorf("terms after an operator's delete: %d overlap violations, want 1 (the next term must wait)", got)
	}
}

// TestReuseCheckerExcusesAForceOfTheSameLease checks the checker on a
// history it once misjudged (CI, seed 2): the operator forces the holder
// of one name, deleting its key and revoking its lease; the revoke also
// deletes the session's key of a second name, whose next contender starts
// at once; the session hears of the revoke 3 ms later, before the observer
// sees the second key's DELETE. The force ended both holds. Without it
// (or with a force that deleted nothing) the same history is an overlap
// nobody explains.
func TestReuseCheckerExcusesAForceOfTheSameLease(t *testing.T) {
	t.Parallel()
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	history := func(actions ...opAction) reuseResult {
		s3, s1 := &sessionRec{worker: "w3", lease: 0x33, closed: -1}, &sessionRec{worker: "w1", lease: 0x11, closed: -1}
		forced := &grant{kind: "acquire", worker: "w3", session: s3, name: "a", key: "/p/a/33", lease: 0x33, token: 10, real: 10,
			start: ms(0), end: ms(104), release: -1, lostBy: lock.ErrLeaseRevoked, deletedAt: -1}
		other := &grant{kind: "acquire", worker: "w3", session: s3, name: "b", key: "/p/b/33", lease: 0x33, token: 12, real: 12,
			start: ms(0), end: ms(104), release: -1, lostBy: lock.ErrLeaseRevoked, deletedAt: -1}
		next := &grant{kind: "acquire", worker: "w1", session: s1, name: "b", key: "/p/b/11", lease: 0x11, token: 14, real: 14,
			start: ms(101), end: ms(150), release: ms(150), deletedAt: -1}
		c := &reuseRun{t: t, grants: []*grant{forced, other, next}, sessions: []*sessionRec{s3, s1}, actions: actions,
			deletions: []deletion{
				{key: forced.key, createRev: 10, modRev: 20, at: ms(99)},
				{key: other.key, createRev: 12, modRev: 21, at: ms(106)},
				{key: next.key, createRev: 14, modRev: 22, at: ms(151)},
			}}
		res := reuseResult{took: ms(200)}
		c.check(&res)
		return res
	}
	force := opAction{kind: "break", key: "/p/a/33", createRev: 10, lease: 0x33, call: ms(95), ret: ms(103), deleted: true}
	if res := history(force); res.violations() != 0 {
		t.Errorf("a force of the session's other name: %v; want no violation", res.counters)
	}
	if got := history().counters[invOverlap]; got != 1 {
		t.Errorf("no operator: %d overlap violations, want 1 (an unexplained overlap)", got)
	}
	maybe := force
	maybe.deleted = false
	if got := history(maybe).counters[invOverlap]; got != 1 {
		t.Errorf("a force that may not have deleted: %d overlap violations, want 1", got)
	}
}

// TestReuseCheckerReadsBackAReleasedKey checks the read-back of a key
// after a Release that returned nil: a key still there is a violation, a
// key released is not.
func TestReuseCheckerReadsBackAReleasedKey(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, shared.Endpoints()...)
	s, err := lock.NewSession(t.Context(), cli, lock.WithPrefix("/selfcheck/"+t.Name()+"/"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	r := &reuseRun{t: t, obs: cli, t0: time.Now()}
	run := func(release bool) reuseResult {
		l, err := s.Acquire(t.Context(), "n")
		if err != nil {
			t.Fatal(err)
		}
		rec := &sessionRec{worker: "w0", lease: s.Lease(), closed: -1}
		g := &grant{kind: "acquire", worker: "w0", session: rec, name: "n", key: l.Key(), lease: s.Lease(), token: l.Token(), real: l.Token(),
			start: 0, end: time.Millisecond, release: time.Millisecond, deletedAt: -1}
		if release {
			if err := l.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		r.grants = []*grant{g}
		r.releasedOK(g) // as if Release had returned nil
		if !release {
			if err := l.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		res := reuseResult{took: time.Second}
		r.check(&res)
		return res
	}
	if got := run(true).signatures[invLeftover+": a key kept by a Release that returned nil"]; got != 0 {
		t.Errorf("released key: %d violations, want 0", got)
	}
	if got := run(false).signatures[invLeftover+": a key kept by a Release that returned nil"]; got != 1 {
		t.Errorf("key not released: %d violations, want 1", got)
	}
}

// TestReuseCheckerFlagsAFailedAcquisitionsMarker checks invariant 5 on
// the marker of an acquisition that never became a grant: left after a
// clean Close of its session it is a violation; after an unclean end of
// the session (lost, abandoned, a failed Close) or an operator's delete
// of its key it is not.
func TestReuseCheckerFlagsAFailedAcquisitionsMarker(t *testing.T) {
	t.Parallel()
	const lease, tok = 0x2a, 0x1f
	marker := fmt.Sprintf("/p/d1%%held/%x-%x", lease, tok)
	left := func(rec sessionRec, actions ...opAction) int {
		rec.lease, rec.closed = lease, time.Second
		c := &reuseRun{t: t, sessions: []*sessionRec{&rec}, actions: actions, stats: map[string]int{}}
		res := reuseResult{took: 2 * time.Second, left: []string{marker}}
		c.check(&res)
		return res.counters[invLeftover]
	}
	if got := left(sessionRec{revoked: true}); got != 1 {
		t.Errorf("after a clean Close: %d violations, want 1", got)
	}
	for name, n := range map[string]int{
		"lost":            left(sessionRec{revoked: true, lost: true}),
		"abandoned":       left(sessionRec{revoked: true, abandoned: true}),
		"failed Close":    left(sessionRec{}),
		"operator delete": left(sessionRec{revoked: true}, opAction{kind: "delete", key: fmt.Sprintf("/p/d1/%x", lease), createRev: tok}),
		"operator break":  left(sessionRec{revoked: true}, opAction{kind: "break", lease: lease}),
	} {
		if n != 0 {
			t.Errorf("%s: %d violations, want 0", name, n)
		}
	}
}

// TestReuseCheckerFlagsATermBeforeTheTenureKeyWasGone is the negative
// control of invariant 6 on the election's terms: a term that starts
// while the tenure key of the term before it is still there — not yet
// deleted, or never — is a violation, and so is a tenure key deleted
// while its own term was active; a term that starts once the key is gone
// (or within tenureRoom of the observer seeing it go) is not.
func TestReuseCheckerFlagsATermBeforeTheTenureKeyWasGone(t *testing.T) {
	t.Parallel()
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	const tenure = "/p/leader%tenure/11-a"
	history := func(tenureGone time.Duration) reuseResult {
		s1, s2 := &sessionRec{worker: "e1", lease: 0x11, closed: -1}, &sessionRec{worker: "e0", lease: 0x22, closed: -1}
		old := &grant{kind: "term", worker: "e1", session: s1, name: "leader", key: "/p/leader/11", lease: 0x11, token: 10, real: 10,
			start: ms(0), end: ms(100), release: -1, deletedAt: -1}
		next := &grant{kind: "term", worker: "e0", session: s2, name: "leader", key: "/p/leader/22", lease: 0x22, token: 12, real: 12,
			start: ms(1000), end: ms(1500), release: ms(1500), deletedAt: -1}
		c := &reuseRun{t: t, grants: []*grant{old, next}, sessions: []*sessionRec{s1, s2}, stats: map[string]int{},
			deletions: []deletion{{key: old.key, createRev: 10, modRev: 11, at: ms(50)}}}
		if tenureGone >= 0 {
			c.deletions = append(c.deletions, deletion{key: tenure, createRev: 10, modRev: 12, at: tenureGone})
		}
		res := reuseResult{took: ms(2000)}
		c.check(&res)
		return res
	}
	for name, tc := range map[string]struct {
		gone time.Duration // -1: never seen deleted
		sig  string
	}{
		"gone before the next term":          {ms(900), ""},
		"gone just after, within the room":   {ms(1000) + tenureRoom, ""},
		"gone after the next term started":   {ms(2000), "next term before the tenure key was gone"},
		"never gone":                         {-1, "next term while the tenure key was there"},
		"gone while its own term was active": {ms(90), "tenure key gone while its term was active"},
	} {
		res := history(tc.gone)
		want := 0
		if tc.sig != "" {
			want = 1
		}
		if got := res.counters[invTenure]; got != want || tc.sig != "" && res.signatures[invTenure+": "+tc.sig] != 1 {
			t.Errorf("%s: %d violations of invariant 6 (%v), want %d %q", name, got, res.signatures, want, tc.sig)
		}
		if res.followedTerms != 1 {
			t.Errorf("%s: %d followed terms checked, want 1", name, res.followedTerms)
		}
	}
}
