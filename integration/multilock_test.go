package integration

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// multiResult is what one run of overlapping multi-name acquisitions saw.
type multiResult struct {
	sets     int // sets acquired and released
	stuck    int // acquisitions of a set given up at the bound
	overlaps int // a name held by two sets at once
	// deadlocks counts the reads of the names' keys that found sessions
	// waiting for one another in a cycle, each behind a key of the next
	// one: a deadlock, which only a wait's bound ends.
	deadlocks int
	cycle     []clientv3.LeaseID // the first cycle found
}

// runMultiLock has workers acquire random overlapping sets of names, each
// set in a random order, for d. naive acquires a set one Acquire at a
// time, in the set's order — the negative control, which can deadlock;
// otherwise a set is one AcquireAll. A set not acquired within bound is
// given up, so that a deadlock ends and the run goes on; meanwhile the
// names' keys are read again and again, each read at one revision, for a
// cycle of waits.
func runMultiLock(t *testing.T, seed uint64, workers, names int, d, bound time.Duration, naive bool) multiResult {
	cli := etcdtest.Client(t, shared.Endpoints()...)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	pfx := fmt.Sprintf("%s%v/", prefixOf(t), naive)
	var (
		mu   sync.Mutex
		held = map[string]int{} // name -> worker holding it
		res  multiResult
		wg   sync.WaitGroup
	)
	wg.Go(func() {
		for ctx.Err() == nil {
			get, err := cli.Get(ctx, pfx, clientv3.WithPrefix())
			if err != nil {
				continue
			}
			if c := waitCycle(pfx, get.Kvs); c != nil {
				mu.Lock()
				if res.deadlocks++; res.cycle == nil {
					res.cycle = c
				}
				mu.Unlock()
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	for w := range workers {
		s := session(t, cli, fmt.Sprintf("w%d", w), lock.WithPrefix(pfx))
		rng := rand.New(rand.NewPCG(seed, uint64(w)))
		wg.Go(func() {
			for ctx.Err() == nil {
				set := rng.Perm(names)[:2+rng.IntN(3)]
				keys := make([]string, len(set))
				for i, n := range set {
					keys[i] = fmt.Sprint("n", n)
				}
				actx, acancel := context.WithTimeout(context.Background(), bound)
				var locks []*lock.Lock
				var err error
				if naive {
					for _, k := range keys {
						var l *lock.Lock
						if l, err = s.Acquire(actx, k); err != nil {
							break
						}
						locks = append(locks, l)
					}
				} else {
					var l *lock.Lock
					if l, err = s.AcquireAll(actx, keys); err == nil {
						locks = append(locks, l)
					}
				}
				acancel()
				if err == nil {
					mu.Lock()
					for _, k := range keys {
						if o, ok := held[k]; ok {
							res.overlaps++
							t.Logf("%s held by w%d and w%d", k, o, w)
						}
						held[k] = w
					}
					mu.Unlock()
					time.Sleep(time.Duration(2+rng.IntN(10)) * time.Millisecond)
					mu.Lock()
					for _, k := range keys {
						delete(held, k)
					}
					res.sets++
					mu.Unlock()
				} else if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
					mu.Lock()
					res.stuck++
					mu.Unlock()
				}
				rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
				for _, l := range locks {
					_ = l.Release(rctx)
				}
				rcancel()
			}
		})
	}
	wg.Wait()
	return res
}

// waitCycle returns the sessions (leases) of a cycle of waits among the
// contender keys kvs of names under pfx, read at one revision, or nil if
// there is none: a contender waits for every contender of the same name
// with a lower create revision. A session that waits holds what it holds
// until its wait ends, so a cycle at one revision is a deadlock.
func waitCycle(pfx string, kvs []*mvccpb.KeyValue) []clientv3.LeaseID {
	byName := map[string][]*mvccpb.KeyValue{}
	for _, kv := range kvs {
		name, _, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), pfx), "/")
		if ok && kv.Lease != 0 && !strings.Contains(name, "%") { // contender keys only
			byName[name] = append(byName[name], kv)
		}
	}
	waits := map[clientv3.LeaseID][]clientv3.LeaseID{}
	for _, ks := range byName {
		for _, a := range ks {
			for _, b := range ks {
				if b.CreateRevision < a.CreateRevision && b.Lease != a.Lease {
					waits[clientv3.LeaseID(a.Lease)] = append(waits[clientv3.LeaseID(a.Lease)], clientv3.LeaseID(b.Lease))
				}
			}
		}
	}
	// Depth-first, the path on a stack: an edge back into it closes a cycle.
	const unseen, onPath, done = 0, 1, 2
	state := map[clientv3.LeaseID]int{}
	var path []clientv3.LeaseID
	var visit func(clientv3.LeaseID) []clientv3.LeaseID
	visit = func(l clientv3.LeaseID) []clientv3.LeaseID {
		state[l] = onPath
		path = append(path, l)
		for _, m := range waits[l] {
			switch state[m] {
			case onPath:
				return slices.Clone(path[slices.Index(path, m):])
			case unseen:
				if c := visit(m); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		state[l] = done
		return nil
	}
	for _, l := range slices.Sorted(maps.Keys(waits)) {
		if state[l] == unseen {
			if c := visit(l); c != nil {
				return c
			}
		}
	}
	return nil
}

// TestWaitCycle checks waitCycle on hand-made reads: two sessions each
// first on one name and behind the other on the other wait in a cycle; an
// AcquireAll's keys, all of one revision, wait only for older ones.
func TestWaitCycle(t *testing.T) {
	t.Parallel()
	kv := func(key string, lease, rev int64) *mvccpb.KeyValue {
		return &mvccpb.KeyValue{Key: []byte("/p/" + key), Lease: lease, CreateRevision: rev}
	}
	for _, tc := range []struct {
		name  string
		kvs   []*mvccpb.KeyValue
		cycle bool
	}{
		{"crossed", []*mvccpb.KeyValue{kv("a/1", 1, 10), kv("b/2", 2, 11), kv("b/1", 1, 12), kv("a/2", 2, 13)}, true},
		{"three", []*mvccpb.KeyValue{kv("a/1", 1, 10), kv("b/2", 2, 11), kv("c/3", 3, 12), kv("b/1", 1, 13), kv("c/2", 2, 14), kv("a/3", 3, 15)}, true},
		{"sets", []*mvccpb.KeyValue{kv("a/1", 1, 10), kv("b/1", 1, 10), kv("b/2", 2, 11), kv("a/2", 2, 11), kv("a/3", 3, 12)}, false},
		{"queue", []*mvccpb.KeyValue{kv("a/1", 1, 10), kv("a/2", 2, 11), kv("b/2", 2, 12), kv("b/3", 3, 13)}, false},
		{"not contenders", []*mvccpb.KeyValue{kv("a/1", 1, 10), kv("b/2", 2, 11), kv("b%held/1-c", 1, 12), kv("a%held/2-d", 2, 13)}, false},
	} {
		if got := waitCycle("/p/", tc.kvs); (got != nil) != tc.cycle {
			t.Errorf("%s: cycle %v, want one: %v", tc.name, got, tc.cycle)
		}
	}
}

// TestAcquireAllCannotDeadlock: 12 workers take random sets of 2 to 4 of
// 6 names, each listed in a random order, as fast as they can. With
// AcquireAll no read of the names' keys may find a cycle of waits and no
// name may be held twice; the naive way (one Acquire per name, in the
// listed order) must deadlock in the same workload, or the check proves
// nothing. Neither depends on how fast the machine is: a wait given up at
// the bound is only counted.
func TestAcquireAllCannotDeadlock(t *testing.T) {
	t.Parallel()
	const workers, names, bound = 12, 6, 4 * time.Second
	r := runMultiLock(t, 1, workers, names, 8*time.Second, bound, false)
	t.Logf("AcquireAll: %d sets acquired, %d given up at %v, %d overlaps, %d reads with a cycle of waits", r.sets, r.stuck, bound, r.overlaps, r.deadlocks)
	if r.deadlocks != 0 || r.overlaps != 0 || r.sets == 0 {
		t.Errorf("AcquireAll: %d reads with a cycle of waits (first: sessions %x), %d overlaps, %d sets; want 0, 0 and progress", r.deadlocks, r.cycle, r.overlaps, r.sets)
	}
	n := runMultiLock(t, 1, workers, names, 8*time.Second, bound, true)
	t.Logf("negative control, one Acquire per name in the listed order: %d sets acquired, %d given up at %v, %d reads with a cycle of waits (first: sessions %x)", n.sets, n.stuck, bound, n.deadlocks, n.cycle)
	if n.deadlocks == 0 {
		t.Errorf("the naive control never deadlocked: the workload cannot tell")
	}
}
