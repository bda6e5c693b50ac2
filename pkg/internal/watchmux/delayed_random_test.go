package watchmux

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"testing/synctest"
	"time"
)

// Delayed watches added in random order (mixed delays, so some
// insert ahead of others and wake Run, others behind and do not), with
// random removals (of the head too), on the fake clock, through the three
// states of Run: waiting without a stream (awaitWork), serving a stream,
// and a stream counting down its idle timeout. Each watch not removed must
// be created at the first step that reaches its due time: not earlier, not
// later.
func TestDelayedWatchesAtRandom(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { synctest.Test(t, func(t *testing.T) { delayedAtRandom(t, seed) }) })
	}
}

type randomWatch struct {
	key              string
	due              time.Time
	w                *Watch
	removed, created bool
}

func delayedAtRandom(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 42))
	h := newHarness(t)
	var s *fakeStream
	var all []*randomWatch
	n := 0
	delays := []time.Duration{20, 50, 100, 100, 100, 150}
	for phase := range 4 {
		for step := range 40 {
			// Actions.
			for range r.IntN(3) {
				if r.IntN(3) > 0 {
					d := delays[r.IntN(len(delays))] * time.Millisecond
					n++
					rw := &randomWatch{key: fmt.Sprintf("k%d", n), due: h.clk.Now().Add(d)}
					rw.w = h.mux.WatchKey(rw.key, 3, 2, d, func(error) {})
					all = append(all, rw)
					continue
				}
				var live []*randomWatch
				for _, rw := range all {
					if !rw.removed && !rw.created {
						live = append(live, rw)
					}
				}
				if len(live) == 0 {
					continue
				}
				sort.SliceStable(live, func(i, j int) bool { return live[i].due.Before(live[j].due) })
				victim := live[0] // the head, half of the time
				if r.IntN(2) == 0 {
					victim = live[r.IntN(len(live))]
				}
				h.mux.Remove(victim.w)
				victim.removed = true
			}
			synctest.Wait() // a woken Run has set its timer again
			d := time.Duration(5+r.IntN(36)) * time.Millisecond
			if slices.ContainsFunc(all, func(rw *randomWatch) bool { return !rw.removed && !rw.created }) {
				h.step(d) // a delayed watch: Run must wait for a timer
			} else {
				h.clk.Step(d)
			}
			now := h.clk.Now()
			var want []string
			for _, rw := range all {
				if !rw.removed && !rw.created && !rw.due.After(now) {
					want = append(want, rw.key)
					rw.created = true
				}
			}
			if len(want) == 0 {
				continue
			}
			if s == nil {
				s = h.stream()
			}
			var got []string
			for range want {
				got = append(got, string(s.create().Key))
			}
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(want, got) {
				t.Fatalf("phase %d step %d (now +%v): created %v, want %v", phase, step, now.Sub(time.Unix(1_000_000, 0)), got, want)
			}
		}
		// Whatever is still delayed is removed; what was created is removed
		// too, which sends its cancel.
		sent := 0
		for _, rw := range all {
			if !rw.removed {
				if rw.created {
					sent++
				}
				h.mux.Remove(rw.w)
				rw.removed = true
			}
		}
		if s == nil {
			continue
		}
		for range sent {
			s.cancel()
		}
		s.silent()
		if phase%2 == 0 {
			// The stream closes after its idle timeout.
			h.step(IdleTimeout)
			s.closed()
			s = nil
			continue
		}
		// A delayed watch added during the idle countdown keeps the stream,
		// which creates it when due.
		h.step(IdleTimeout - time.Millisecond)
		n++
		rw := &randomWatch{key: fmt.Sprintf("k%d", n), due: h.clk.Now().Add(100 * time.Millisecond)}
		rw.w = h.mux.WatchKey(rw.key, 3, 2, 100*time.Millisecond, func(error) {})
		all = append(all, rw)
		synctest.Wait()
		h.step(50 * time.Millisecond)
		select {
		case <-s.ctx.Done():
			t.Fatal("stream closed as idle with a delayed watch")
		default:
		}
		h.step(50 * time.Millisecond)
		if c := s.create(); string(c.Key) != rw.key {
			t.Fatalf("created %q, want %q", c.Key, rw.key)
		}
		rw.created = true
	}
	if s != nil {
		s.silent()
	}
}
