package watchmux

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.uber.org/goleak"
	"google.golang.org/grpc/metadata"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var noPut = []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NOPUT}

// A watch is created on a stream opened with WithRequireLeader, with the
// Mux's own watch ID, for deletions only; a deletion fires it once and the
// server's watch is canceled.
func TestDeletionFiresTheWatchOnceAndCancelsIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.noStream() // nothing to watch, no stream
		held, pred := newFiring(), newFiring()
		h.mux.WatchKey("held", 7, 5, 0, held.fire)
		s := h.stream()
		if md, _ := metadata.FromOutgoingContext(s.ctx); len(md.Get(rpctypes.MetadataRequireLeaderKey)) == 0 || md.Get(rpctypes.MetadataRequireLeaderKey)[0] != rpctypes.MetadataHasLeader {
			t.Errorf("stream opened without WithRequireLeader: metadata %v", md)
		}
		c := s.create()
		want := &pb.WatchCreateRequest{Key: []byte("held"), StartRevision: 7, Filters: noPut, WatchId: c.WatchId}
		if diff := cmp.Diff(want.String(), c.String()); diff != "" {
			t.Errorf("create request (-want +got):\n%s", diff)
		}
		s.created(c)

		created := make(chan struct{}, 2)
		h.mux.WatchFromNow("pred", pred.fire, func() { created <- struct{}{} })
		p := s.create()
		if p.StartRevision != 0 || p.WatchId == c.WatchId {
			t.Errorf("from-now create %v: want start revision 0 and a new ID", p)
		}
		select {
		case <-created:
			t.Fatal("created called before etcd created the watch")
		default:
		}
		s.created(p)
		select {
		case <-created:
		case <-time.After(wait):
			t.Fatal("created not called")
		}

		s.deleted(c, 9)
		if err := held.fired(t); err != nil {
			t.Errorf("fired with %v, want nil", err)
		}
		if id := s.cancel(); id != c.WatchId {
			t.Errorf("canceled watch %d, want the fired one, %d", id, c.WatchId)
		}
		s.deleted(c, 10) // a late event of the canceled watch
		held.notFired(t)
		s.deleted(p, 11)
		if err := pred.fired(t); err != nil {
			t.Errorf("fired with %v, want nil", err)
		}
		s.cancel()
		if n := h.mux.entries(); n != 0 {
			t.Errorf("%d entries left after both watches fired", n)
		}
	})
}

// An own-key watch is created only once its delay has passed; one removed
// before that costs no stream and leaves nothing behind.
func TestOwnKeyWatchIsCreatedOnlyAfterItsDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := newFiring()
		w := h.mux.WatchKey("gone-soon", 3, 2, 100*time.Millisecond, f.fire)
		h.step(50 * time.Millisecond)
		h.mux.Remove(w)
		h.noStream()
		if n := h.mux.entries(); n != 0 {
			t.Errorf("%d entries left after removing a delayed watch", n)
		}
		h.clk.Step(time.Second)
		h.noStream()

		h.mux.WatchKey("held", 3, 2, 100*time.Millisecond, f.fire)
		h.step(99 * time.Millisecond)
		h.noStream()
		h.step(time.Millisecond)
		s := h.stream()
		if c := s.create(); string(c.Key) != "held" || c.StartRevision != 3 {
			t.Errorf("created %v, want held from revision 3", c)
		}
		f.notFired(t)
	})
}

// Delayed watches added behind one another (which do not wake the Mux)
// are each created when due, also when the one ahead of them was removed
// first: the Mux wakes for the removed watch's due time and sets its next
// wake-up from the new head of the list.
func TestDelayedWatchesBehindOneAnother(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		a := h.mux.WatchKey("a", 3, 2, 100*time.Millisecond, func(error) {})
		h.step(30 * time.Millisecond)
		h.mux.WatchKey("b", 3, 2, 100*time.Millisecond, func(error) {}) // due at 130 ms
		h.step(30 * time.Millisecond)
		h.mux.WatchKey("c", 3, 2, 100*time.Millisecond, func(error) {}) // due at 160 ms
		h.mux.Remove(a)
		h.step(40 * time.Millisecond) // 100 ms: a's due time; a is gone
		h.noStream()
		h.step(29 * time.Millisecond)
		h.noStream()
		h.step(time.Millisecond) // 130 ms
		s := h.stream()
		if c := s.create(); string(c.Key) != "b" {
			t.Fatalf("created %q first, want b", c.Key)
		}
		s.silent()
		h.step(30 * time.Millisecond) // 160 ms
		if c := s.create(); string(c.Key) != "c" {
			t.Fatalf("created %q, want c", c.Key)
		}
	})
}

// Many watches removed within their delay leave nothing behind, whether or
// not a stream is open, and the Mux keeps serving watches added later (the
// bug: a removed entry stayed in the delayed list, and the loop, woken only
// when that list became non-empty, slept through every later watch).
func TestQuickRemovesLeaveNothing(t *testing.T) {
	for _, withStream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", withStream), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				var s *fakeStream
				base := 0
				if withStream {
					h.mux.WatchFromNow("pred", func(error) {}, nil)
					s = h.stream()
					s.createdAll(1)
					base = 1 // the watch; its created reply took it off pending
					synctest.Wait()
				}
				for i := range 500 {
					w := h.mux.WatchKey(fmt.Sprintf("k%d", i), 3, 2, 100*time.Millisecond, func(error) {})
					h.mux.Remove(w)
				}
				if n := h.mux.entries(); n != base {
					t.Errorf("%d entries after 500 quick cycles, want %d", n, base)
				}
				f := newFiring()
				h.mux.WatchKey("held", 3, 2, 100*time.Millisecond, f.fire)
				h.step(100 * time.Millisecond)
				if s == nil {
					s = h.stream()
				}
				c := s.create()
				if string(c.Key) != "held" {
					t.Fatalf("created %q, want held", c.Key)
				}
				s.created(c)
				s.deleted(c, 5)
				if err := f.fired(t); err != nil {
					t.Errorf("fired with %v", err)
				}
			})
		})
	}
}

// Remove cancels a created watch on the server; on one flush, cancels go
// out before creates; a watch removed before it was sent is never sent.
func TestRemoveSendsCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		a := h.mux.WatchKey("a", 3, 2, 0, func(error) {})
		s := h.stream()
		ca := s.create()
		s.created(ca)

		// The Mux blocks sending c's create until the test reads it; meanwhile
		// a is removed, b added and d added and removed.
		h.mux.WatchFromNow("c", func(error) {}, nil)
		s.inSend()
		h.mux.Remove(a)
		h.mux.Remove(a) // idempotent
		h.mux.WatchFromNow("b", func(error) {}, nil)
		d := h.mux.WatchFromNow("d", func(error) {}, nil)
		h.mux.Remove(d)
		if c := s.create(); string(c.Key) != "c" {
			t.Fatalf("created %q, want c", c.Key)
		}
		if id := s.cancel(); id != ca.WatchId {
			t.Errorf("canceled %d, want a's %d", id, ca.WatchId)
		}
		if c := s.create(); string(c.Key) != "b" {
			t.Errorf("created %q, want b (d was removed before it was sent)", c.Key)
		}
		s.silent()
		// The server's reply to the cancel changes nothing.
		s.reply(&pb.WatchResponse{Header: &pb.ResponseHeader{}, WatchId: ca.WatchId, Canceled: true})
		s.silent()
	})
}

// A watch etcd ended, for compaction or for another reason, is canceled on
// the server too and its key re-read: a key still there with its create
// revision is watched again from after the read, with a new ID; one gone or
// re-created fires. A from-now watch fires at once.
func TestEndedWatchIsRereadThenCreatedAgainOrFires(t *testing.T) {
	serverCanceled := func(id int64) *pb.WatchResponse {
		return &pb.WatchResponse{Header: &pb.ResponseHeader{}, WatchId: id, Canceled: true, CancelReason: "server says so"}
	}
	for _, tc := range []struct {
		name      string
		end       func(watchID int64) *pb.WatchResponse
		createRev int64 // in the re-read; the key's is 2
		fires     bool
	}{
		{"compacted/kept", compacted, 2, false},
		{"compacted/gone", compacted, 0, true},
		{"compacted/re-created", compacted, 8, true},
		{"canceled by the server/kept", serverCanceled, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHeld(t)
				h.s.reply(tc.end(h.c.WatchId))
				if id := h.s.cancel(); id != h.c.WatchId {
					t.Errorf("canceled %d, want the ended watch %d", id, h.c.WatchId)
				}
				h.read().answer(30, tc.createRev)
				if tc.fires {
					if err := h.f.fired(t); err != nil {
						t.Errorf("fired with %v", err)
					}
					h.s.silent()
					return
				}
				if c2 := h.s.create(); c2.StartRevision != 31 || c2.WatchId == h.c.WatchId {
					t.Errorf("re-created %v, want start revision 31 and a new ID", c2)
				}
				h.f.notFired(t)
			})
		})
	}
	t.Run("from now", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t)
			f := newFiring()
			h.mux.WatchFromNow("pred", f.fire, nil)
			s := h.stream()
			c := s.create()
			s.created(c)
			s.reply(compacted(c.WatchId))
			if err := f.fired(t); err != nil {
				t.Errorf("fired with %v", err)
			}
			s.cancel()
		})
	})
}
