package watchmux

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// After a stream breaks, the next one is opened after a backoff on the
// clock; from-now watches fire when it opens, and own-key watches are
// re-read in one batch and created again from after the read, or fire if
// their key is gone.
func TestBrokenStreamReopensAfterBackoffAndRereadsOwnKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		a, b, p := newFiring(), newFiring(), newFiring()
		h.mux.WatchKey("a", 3, 2, 0, a.fire)
		h.mux.WatchKey("b", 4, 3, 0, b.fire)
		h.mux.WatchFromNow("p", p.fire, nil)
		s := h.stream()
		s.createdAll(3)
		s.broken(errReset)
		s.closed()
		p.notFired(t) // not before a new stream can carry the waiter's watch
		h.noStream()

		h.step(minBackoff) // the stream worked: the backoff starts from the minimum
		s2 := h.stream()
		if err := p.fired(t); err != nil {
			t.Errorf("from-now watch fired with %v", err)
		}
		r := h.read()
		keys := slices.Clone(r.keys)
		slices.Sort(keys)
		if diff := cmp.Diff([]string{"a", "b"}, keys); diff != "" {
			t.Fatalf("re-read keys (-want +got):\n%s", diff)
		}
		revs := map[string]int64{"a": 2, "b": 0} // b is gone
		r.answer(50, revs[r.keys[0]], revs[r.keys[1]])
		if err := b.fired(t); err != nil {
			t.Errorf("b fired with %v", err)
		}
		if c := s2.create(); string(c.Key) != "a" || c.StartRevision != 51 {
			t.Errorf("created %v, want a from revision 51", c)
		}
		a.notFired(t)
	})
}

// The reconnect backoff doubles, with jitter, while streams fail before
// creating a watch, and starts again from the minimum once one has.
func TestReconnectBackoffDoublesUntilAWatchIsCreated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.mux.WatchKey("held", 3, 2, 0, func(error) {})
		s := h.stream()
		s.create()
		s.broken(errReset)
		// Equal jitter: a wait drawn from [b/2, b) for b = 50ms, 100ms, 200ms...
		for _, b := range []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond} {
			h.step(b/2 - time.Millisecond)
			h.noStream()
			h.step(b/2 + time.Millisecond)
			s = h.stream()
			h.read().answer(10, 2)
			c := s.create()
			if b == 200*time.Millisecond {
				s.created(c) // this one works
			}
			s.broken(errReset)
		}
		h.step(minBackoff)
		s = h.stream()
		h.read().answer(10, 2)
		s.create()
	})
}

// Own-key watches are re-read in transactions of at most MaxReadKeys keys,
// each watch created again from after its own transaction's revision.
func TestRereadBatchesAtMostMaxReadKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		const n = 2*MaxReadKeys + 44
		for i := range n {
			h.mux.WatchKey(fmt.Sprintf("k%03d", i), 3, 2, 0, func(error) {})
		}
		s := h.stream()
		s.createdAll(n)
		s = h.reconnect(s)
		seen := map[string]bool{}
		for i, size := range []int{MaxReadKeys, MaxReadKeys, 44} {
			r := h.read()
			if len(r.keys) != size {
				t.Fatalf("read %d: %d keys, want %d", i, len(r.keys), size)
			}
			rev := int64(100 * (i + 1))
			revs := make([]int64, size)
			for j, k := range r.keys {
				revs[j] = 2
				if seen[k] {
					t.Fatalf("%s re-read twice", k)
				}
				seen[k] = true
			}
			r.answer(rev, revs...)
			for range size {
				if c := s.create(); c.StartRevision != rev+1 {
					t.Fatalf("created %s from %d, want %d", c.Key, c.StartRevision, rev+1)
				}
			}
		}
		if len(seen) != n {
			t.Errorf("re-read %d keys, want %d", len(seen), n)
		}
	})
}

// A failed or hung re-read is retried after a backoff; the watch waits.
func TestFailedOrHungRereadIsRetriedAfterBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeld(t)
		h.s.reply(compacted(h.c.WatchId))
		h.s.cancel()

		h.read().fail(errors.New("etcdserver: request timed out"))
		h.step(minBackoff/2 - time.Millisecond)
		select {
		case <-h.reads:
			t.Fatal("re-read again before the backoff")
		case <-time.After(quiet):
		}
		h.step(minBackoff/2 + time.Millisecond)
		r := h.read() // hangs until its timeout
		h.step(readTimeout)
		select {
		case <-r.ctx.Done():
		case <-time.After(wait):
			t.Fatal("the hung re-read was not canceled at its timeout")
		}
		h.step(minBackoff) // the second failure: up to twice the minimum
		h.step(minBackoff)
		h.read().answer(60, 2)
		if c := h.s.create(); c.StartRevision != 61 {
			t.Errorf("created from %d, want 61", c.StartRevision)
		}
		h.f.notFired(t)
	})
}

// A stream left without watches is closed after IdleTimeout, and opened
// again, without delay, for the next watch.
func TestIdleStreamClosesAndReopensForTheNextWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		w := h.mux.WatchFromNow("p", func(error) {}, nil)
		s := h.stream()
		c := s.create()
		s.created(c)
		h.mux.Remove(w)
		if id := s.cancel(); id != c.WatchId {
			t.Fatalf("canceled %d, want %d", id, c.WatchId)
		}
		h.step(IdleTimeout - time.Millisecond)
		s.silent()
		if s.ctx.Err() != nil {
			t.Fatal("stream closed before the idle timeout")
		}
		h.step(time.Millisecond)
		s.closed()
		h.noStream()
		h.mux.WatchFromNow("q", func(error) {}, nil)
		if c := h.stream().create(); string(c.Key) != "q" {
			t.Errorf("created %q, want q", c.Key)
		}
	})
}

// The idle countdown starts when the last watch goes, even when that watch
// was still delayed: removing it wakes the Mux, which would otherwise sleep
// until the removed watch's due time and only then start counting.
func TestIdleCountdownStartsWhenTheLastDelayedWatchGoes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		w := h.mux.WatchFromNow("p", func(error) {}, nil)
		s := h.stream()
		c := s.create()
		s.created(c)
		d := h.mux.WatchKey("d", 3, 2, 150*time.Millisecond, func(error) {})
		h.mux.Remove(w)
		if id := s.cancel(); id != c.WatchId {
			t.Fatalf("canceled %d, want %d", id, c.WatchId)
		}
		synctest.Wait() // the Mux sleeps until d is due
		h.mux.Remove(d)
		h.step(IdleTimeout)
		s.closed()
	})
}

// A re-read etcd refuses for permission is retried one key at a time, at
// once; a key whose own read is refused fires with a *RefusedError, the
// others are watched again.
func TestRereadRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		fs := map[string]firing{"a": newFiring(), "b": newFiring()}
		h.mux.WatchKey("a", 3, 2, 0, fs["a"].fire)
		h.mux.WatchKey("b", 3, 2, 0, fs["b"].fire)
		s := h.stream()
		s.createdAll(2)
		s = h.reconnect(s)
		if r := h.read(); len(r.keys) != 2 {
			t.Fatalf("re-read %v, want both keys in one read", r.keys)
		} else {
			r.fail(rpctypes.ErrPermissionDenied)
		}
		var denied string
		for range 2 {
			r := h.read()
			if len(r.keys) != 1 {
				t.Fatalf("re-read %v, want one key", r.keys)
			}
			if denied == "" {
				denied = r.keys[0]
				r.fail(rpctypes.ErrPermissionDenied)
				continue
			}
			r.answer(70, 2)
			if c := s.create(); string(c.Key) != r.keys[0] || c.StartRevision != 71 {
				t.Errorf("created %v, want %s from 71", c, r.keys[0])
			}
		}
		err := fs[denied].fired(t)
		var re *RefusedError
		if !errors.As(err, &re) || re.Key != denied || !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Errorf("%s fired with %v, want a *RefusedError for it", denied, err)
		}
		for k, f := range fs {
			if k != denied {
				f.notFired(t)
			}
		}
	})
}

// A stream that delivers nothing for ProbeAfter is asked for a progress
// report; one answered keeps the stream, one unanswered for ProbeTimeout
// replaces it, and the held key's re-read on the next stream finds the
// deletion the silent stream never delivered.
func TestSilentStreamIsReplaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHeld(t)
		h.step(ProbeAfter - time.Millisecond)
		if n := h.s.progressRequests(); n != 0 {
			t.Fatalf("%d progress requests before ProbeAfter", n)
		}
		h.step(time.Millisecond)
		h.waitProgressRequests(h.s, 1)
		h.s.progressed(10)
		h.step(ProbeTimeout)
		if h.s.ctx.Err() != nil {
			t.Fatal("a stream that answered its progress request was replaced")
		}

		// Asked again after another ProbeAfter of quiet: no answer this time.
		h.step(ProbeAfter - ProbeTimeout)
		h.waitProgressRequests(h.s, 2)
		h.step(ProbeTimeout - time.Millisecond)
		if h.s.ctx.Err() != nil {
			t.Fatal("stream replaced before ProbeTimeout")
		}
		h.step(time.Millisecond)
		h.s.closed()
		h.step(minBackoff)
		h.stream()
		h.read().answer(70, 0) // deleted while the stream was silent
		if err := h.f.fired(t); err != nil {
			t.Errorf("held key's watch fired with %v", err)
		}
	})
}

// waitProgressRequests waits until s has carried n progress requests.
func (h *harness) waitProgressRequests(s *fakeStream, n int) {
	h.t.Helper()
	synctest.Wait()
	if got := s.progressRequests(); got < n {
		h.t.Fatalf("%d progress requests, want %d", got, n)
	}
}
