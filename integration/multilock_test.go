package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// multiResult is what one run of overlapping multi-name acquisitions saw.
type multiResult struct {
	sets     int // sets acquired and released
	stuck    int // acquisitions of a set that did not finish within the bound: deadlocks
	overlaps int // a name held by two sets at once
}

// runMultiLock has workers acquire random overlapping sets of names, each
// set in a random order, for d. naive acquires a set one Acquire at a
// time, in the set's order — the negative control, which can deadlock;
// otherwise a set is one AcquireAll. A set not acquired within bound
// counts as stuck.
func runMultiLock(t *testing.T, seed uint64, workers, names int, d, bound time.Duration, naive bool) multiResult {
	cli := etcdtest.Client(t, shared.Endpoints()...)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var (
		mu   sync.Mutex
		held = map[string]int{} // name -> worker holding it
		res  multiResult
		wg   sync.WaitGroup
	)
	for w := range workers {
		s := session(t, cli, fmt.Sprintf("w%d", w), lock.WithPrefix(fmt.Sprintf("%s%v/", prefixOf(t), naive)))
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

// TestAcquireAllCannotDeadlock: 12 workers take random sets of 2 to 4 of
// 6 names, each listed in a random order, as fast as they can. With
// AcquireAll no set may wait past the bound and no name may be held twice;
// the naive way (one Acquire per name, in the listed order) must deadlock
// in the same workload, or the check proves nothing.
func TestAcquireAllCannotDeadlock(t *testing.T) {
	t.Parallel()
	const workers, names, bound = 12, 6, 4 * time.Second
	r := runMultiLock(t, 1, workers, names, 8*time.Second, bound, false)
	t.Logf("AcquireAll: %d sets acquired, %d stuck past %v, %d overlaps", r.sets, r.stuck, bound, r.overlaps)
	if r.stuck != 0 || r.overlaps != 0 || r.sets < workers {
		t.Errorf("AcquireAll: %d stuck, %d overlaps, %d sets; want 0, 0 and progress", r.stuck, r.overlaps, r.sets)
	}
	n := runMultiLock(t, 1, workers, names, 8*time.Second, bound, true)
	t.Logf("negative control, one Acquire per name in the listed order: %d sets acquired, %d stuck past %v", n.sets, n.stuck, bound)
	if n.stuck == 0 {
		t.Errorf("the naive control never deadlocked: the workload cannot tell")
	}
}
