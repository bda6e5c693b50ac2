package watchmux

import (
	"errors"
	"testing"
	"testing/synctest"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// A WatchHeld watch asks etcd for puts as well as deletions: a put of its
// key fires it with ErrModified, a deletion with nil, as WatchKey.
func TestHeldWatchFiresOnAPut(t *testing.T) {
	for _, tc := range []struct {
		name  string
		event func(s *fakeStream, c *pb.WatchCreateRequest)
		want  error
	}{
		{"put", func(s *fakeStream, c *pb.WatchCreateRequest) { s.put(c, 9) }, ErrModified},
		{"delete", func(s *fakeStream, c *pb.WatchCreateRequest) { s.deleted(c, 9) }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				f := newFiring()
				h.mux.WatchHeld("held", 3, 2, 0, f.fire)
				s := h.stream()
				c := s.create()
				if len(c.Filters) != 0 || c.StartRevision != 3 {
					t.Errorf("create request %v: want puts reported, from revision 3", c)
				}
				s.created(c)
				tc.event(s, c)
				if err := f.fired(t); !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
					t.Errorf("fired with %v, want %v", err, tc.want)
				}
				s.cancel()
			})
		})
	}
}

// A re-read after a broken stream fires a WatchHeld watch whose key was
// written meanwhile (its mod revision moved on), and re-creates it when the
// key is as it was; a WatchKey watch ignores the write (the control).
func TestHeldWatchRereadSeesAWrite(t *testing.T) {
	for _, tc := range []struct {
		name  string
		held  bool
		mod   int64
		fires bool
	}{
		{"held/written", true, 8, true},
		{"held/unchanged", true, 2, false},
		{"key/written", false, 8, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				f := newFiring()
				if tc.held {
					h.mux.WatchHeld("held", 3, 2, 0, f.fire)
				} else {
					h.mux.WatchKey("held", 3, 2, 0, f.fire)
				}
				s := h.stream()
				s.created(s.create())
				s.broken(errReset)
				h.step(maxBackoff)
				s2 := h.stream()
				h.read().answerRevs(30, Revs{Create: 2, Mod: tc.mod})
				if tc.fires {
					if err := f.fired(t); !errors.Is(err, ErrModified) {
						t.Errorf("fired with %v, want ErrModified", err)
					}
					return
				}
				if c := s2.create(); c.StartRevision != 31 {
					t.Errorf("re-created %v, want start revision 31", c)
				}
				f.notFired(t)
			})
		})
	}
}
