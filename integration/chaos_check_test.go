package integration

import (
	"context"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/fencing"
)

// check runs every check on the finished run.
func (c *chaosRun) check(t *testing.T) chaosResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := chaosResult{kind: c.cfg.kind, seed: c.cfg.seed, control: c.cfg.control, ops: len(c.history), faults: c.faults, hashesEqual: true, minLead: -1}

	// Deletions of holder keys, as operations: each happened after some
	// Acquire saw its key alive (and after the observer saw it created),
	// and before the observer saw it deleted. Deletions of keys that never
	// held the lock cannot change the model and are left out.
	firstAcquire := map[partToken]int64{}
	for _, op := range c.history {
		if in := op.Input.(lockInput); in.Kind == opAcquire {
			pt := partToken{in.Name, in.Token}
			if at, ok := firstAcquire[pt]; !ok || op.Call < at {
				firstAcquire[pt] = op.Call
			}
		}
	}
	for pt, at := range firstAcquire {
		del, ok := c.deletedAt[pt]
		if !ok {
			continue
		}
		if put, seen := c.putAt[pt]; seen && int64(put) < at {
			at = int64(put)
		}
		c.history = append(c.history, porcupine.Operation{ClientId: len(c.history),
			Input: lockInput{pt.part, opFree, pt.tok}, Call: at, Return: int64(del)})
	}

	// Linearizability with porcupine.
	res, info := porcupine.CheckOperationsVerbose(lockModel, c.history, 30*time.Second)
	r.check = res
	if res != porcupine.Ok {
		f, err := os.CreateTemp("", fmt.Sprintf("etcdlock-chaos-seed%d-*.html", c.cfg.seed))
		if err == nil {
			_ = porcupine.Visualize(lockModel, info, f)
			f.Close()
			r.visualization = f.Name()
			c.dumpHistory(f.Name() + ".txt")
		}
	}

	// Register: writes in applied order never go back.
	for _, log := range c.applied {
		var high fencing.Token
		for _, tok := range log {
			if tok < high {
				r.staleAccepted++
			}
			high = max(high, tok)
		}
	}
	for _, op := range c.history {
		in := op.Input.(lockInput)
		if in.Kind == opRegister && op.Output == false {
			r.staleRejected++
		}
	}
	r.staleAttempted = r.staleRejected + r.staleAccepted

	// Terms per part (a name, or a semaphore's slot): no two overlap
	// unless both are readers, a term's token exceeds that of every term
	// that ended before it began, the server never deletes a key before its
	// holder stopped believing in it.
	byPart := map[string][]*term{}
	for _, tm := range c.terms {
		byPart[tm.part] = append(byPart[tm.part], tm)
		if _, seen := c.putAt[partToken{tm.part, tm.token}]; c.cfg.kind == kindMulti && !seen {
			// All or none: every name of a set got its key at the set's
			// token, in the one transaction.
			r.partialSets++
			t.Logf("w%d holds a set with %s, but no key of %s was created at token %v", tm.worker, tm.part, tm.part, tm.token)
		}
		if c.cfg.kind == kindSemaphore && (tm.slot < 0 || tm.slot >= c.cfg.limit) {
			r.overLimit++
			t.Logf("semaphore holder w%d of %s in slot %d, limit %d", tm.worker, tm.name, tm.slot, c.cfg.limit)
		}
	}
	for _, terms := range byPart {
		sort.Slice(terms, func(i, j int) bool { return terms[i].start < terms[j].start })
		if c.cfg.kind == kindDelay {
			unclean, short := c.checkDelays(t, terms)
			r.uncleanEnds += unclean
			r.shortDelays += short
		}
		for i := 1; i < len(terms); i++ {
			for _, prev := range terms[:i] {
				if terms[i].start < prev.end && !(prev.shared && terms[i].shared) {
					r.doubleGrants++
					t.Logf("double grant on %s: w%d (token %v, shared %v) active until %v, w%d (token %v, shared %v) from %v",
						terms[i].part, prev.worker, prev.token, prev.shared, prev.end, terms[i].worker, terms[i].token, terms[i].shared, terms[i].start)
				}
				// Strictly increasing, even for one worker: a re-acquire
				// after a failed release gets a new token, never the old.
				// (Two readers may become active out of token order.)
				if prev.end <= terms[i].start && terms[i].token <= prev.token && !(prev.shared && terms[i].shared) {
					r.tokenRegressions++
					t.Logf("token regression on %s: w%d token %v after w%d token %v", terms[i].part, terms[i].worker, terms[i].token, prev.worker, prev.token)
				}
			}
		}
		for _, tm := range terms {
			del, ok := c.deletedAt[partToken{tm.part, tm.token}]
			// Only a deletion the server made counts: one seen after the
			// holder's own Release call may be that release.
			serverDeleted := ok && (tm.releaseCall == 0 || del < tm.releaseCall)
			if tm.lostAt > 0 && serverDeleted && c.cfg.control == controlNone {
				lead := del - tm.lostAt
				if lead < 0 {
					r.earlyDeletes++
				}
				if r.minLead < 0 || lead < r.minLead {
					r.minLead = lead
				}
			}
			if tm.partitionedAt > 0 && ok {
				r.maxStuck = max(r.maxStuck, del-tm.partitionedAt)
			}
		}
	}
	r.badReleases = c.badReleases

	// Every member holds the same data at the same revision.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := c.obs.Get(ctx, "x")
	if err == nil {
		var first uint32
		for i, ep := range c.cluster.Endpoints() {
			var h *clientv3.HashKVResponse
			for range 50 { // a restarted member may still be catching up
				if h, err = c.obs.HashKV(ctx, ep, st.Header.Revision); err == nil {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				r.hashesEqual = false
				t.Logf("HashKV %s: %v", ep, err)
				continue
			}
			if i == 0 {
				first = h.Hash
			} else if h.Hash != first {
				r.hashesEqual = false
			}
		}
	} else {
		r.hashesEqual = false
	}
	return r
}

// checkDelays counts the terms of one name that began sooner than the
// lock-delay after the previous holder's key went uncleanly: deleted by
// the server (expiry, revocation), not by its holder's Release. The
// observer sees a deletion a little after it happens, hence the slack.
//
// It returns how many unclean ends had a next holder, and how many of
// those next holders began too soon.
func (c *chaosRun) checkDelays(t *testing.T, terms []*term) (unclean, short int) {
	const slack = 200 * time.Millisecond
	for i := 1; i < len(terms); i++ {
		prev, next := terms[i-1], terms[i]
		del, ok := c.deletedAt[partToken{prev.part, prev.token}]
		if !ok || prev.releaseCall != 0 && del >= prev.releaseCall {
			continue // a clean end, or not seen
		}
		unclean++
		if next.start < del+chaosLockDelay-slack {
			short++
			t.Logf("lock-delay: w%d's key of %s (token %v) went uncleanly at %v; w%d was active at %v, %v later (delay %v)",
				prev.worker, prev.part, prev.token, del, next.worker, next.start, next.start-del, chaosLockDelay)
		}
	}
	return unclean, short
}

// dumpHistory writes the history as text, one operation per line in call
// order, for reading next to the visualization.
func (c *chaosRun) dumpHistory(path string) {
	ops := append([]porcupine.Operation(nil), c.history...)
	sort.Slice(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
	f, err := os.Create(path)
	if err != nil {
		return
	}
	defer f.Close()
	for _, op := range ops {
		ret := "never"
		if op.Return != never {
			ret = time.Duration(op.Return).String()
		}
		fmt.Fprintf(f, "%12v %12v  %s\n", time.Duration(op.Call), ret, lockModel.DescribeOperation(op.Input, op.Output))
	}
}
