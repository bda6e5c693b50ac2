package watchmux

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// take waits for f's next update.
func take(t *testing.T, f *Feed) Update {
	t.Helper()
	select {
	case <-f.Ready():
	case <-time.After(wait):
		t.Fatal("no update")
	}
	u, ok := f.Take()
	if !ok {
		t.Fatal("Ready signaled with nothing to take")
	}
	return u
}

// events sends evs to c's watch at revision rev.
func (s *fakeStream) events(c *pb.WatchCreateRequest, rev int64, evs ...*mvccpb.Event) {
	s.t.Helper()
	s.reply(&pb.WatchResponse{Header: &pb.ResponseHeader{Revision: rev}, WatchId: c.WatchId, Events: evs})
}

func deletion(key string, rev, createRev int64) *mvccpb.Event {
	return &mvccpb.Event{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte(key), ModRevision: rev},
		PrevKv: &mvccpb.KeyValue{Key: []byte(key), CreateRevision: createRev}}
}

// A Feed's range watch asks etcd for the range, the previous versions and
// deletions only; its owner takes the creation, then every event in order,
// merged when it takes late, and the end of a broken stream's watch, which
// comes once a new stream is open.
func TestFeedDeliversCreationEventsInOrderThenItsEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		f := h.mux.Feed(Range{Key: "q/", End: "q0", PrevKV: true})
		defer f.Close()
		s := h.stream()
		c := s.create()
		want := &pb.WatchCreateRequest{Key: []byte("q/"), RangeEnd: []byte("q0"), PrevKv: true, Filters: noPut, WatchId: c.WatchId}
		if diff := cmp.Diff(want.String(), c.String()); diff != "" {
			t.Errorf("create request (-want +got):\n%s", diff)
		}
		if _, ok := f.Take(); ok {
			t.Error("an update before etcd created the watch")
		}
		s.created(c)
		if u := take(t, f); !u.Created || u.Ended || len(u.Events) != 0 {
			t.Errorf("first update %+v, want the creation alone", u)
		}
		s.events(c, 8, deletion("q/a", 8, 3))
		s.events(c, 9, deletion("q/b", 9, 4), deletion("q/c", 9, 5))
		s.progressed(9) // not an update
		u := take(t, f)
		var got []string
		for _, ev := range u.Events {
			got = append(got, string(ev.Kv.Key))
		}
		if diff := cmp.Diff([]string{"q/a", "q/b", "q/c"}, got); diff != "" || u.Created || u.Ended {
			t.Errorf("update %+v, want three events in order (-want +got):\n%s", u, diff)
		}

		s.broken(errReset)
		s.closed()
		h.step(minBackoff)
		h.stream()
		if u := take(t, f); !u.Ended || u.Err != nil {
			t.Errorf("after a broken stream: %+v, want the end of the watch, without error", u)
		}
		if n := h.mux.entries(); n != 0 {
			t.Errorf("%d entries left after the feed's watch ended", n)
		}
	})
}

// A range watch without an events callback fires on the range's first
// event: a put, where puts are watched. Etcd's end of it (a compacted start
// revision) fires it too, for the owner to read again.
func TestRangeFiresOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		put, gone := newFiring(), newFiring()
		h.mux.WatchRange(Range{Key: "p/", End: "p0", Rev: 5, Puts: true}, nil, put.fire, nil)
		s := h.stream()
		c := s.create()
		if c.StartRevision != 5 || len(c.Filters) != 0 || c.PrevKv {
			t.Errorf("create %v: want revision 5, puts and no previous versions", c)
		}
		s.created(c)
		s.events(c, 6, &mvccpb.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte("p/x"), ModRevision: 6}})
		if err := put.fired(t); err != nil {
			t.Errorf("fired with %v", err)
		}
		s.cancel()
		put.notFired(t)

		h.mux.WatchRange(Range{Key: "d/", End: "d0", Rev: 2}, nil, gone.fire, nil)
		d := s.create()
		s.created(d)
		s.reply(compacted(d.WatchId))
		if err := gone.fired(t); err != nil {
			t.Errorf("fired with %v", err)
		}
	})
}
