package watchmux

import (
	"errors"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// A permission refusal ends the refused watch with a *RefusedError and
// leaves the stream and the other watches alone; any other refusal (an
// expired token) replaces the stream, and the refused watch is re-read and
// created again there.
func TestPermissionRefusalEndsOnlyTheRefusedWatch(t *testing.T) {
	t.Run("permission denied", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t)
			other, refused, waiter := newFiring(), newFiring(), newFiring()
			h.mux.WatchKey("other", 3, 2, 0, other.fire)
			h.mux.WatchKey("secret", 3, 2, 0, refused.fire)
			h.mux.WatchFromNow("secret-pred", waiter.fire, nil)
			s := h.stream()
			co := s.create()
			s.create()
			s.create()
			s.created(co)
			deny := &pb.WatchResponse{Header: &pb.ResponseHeader{}, WatchId: -1, Created: true, Canceled: true, CancelReason: rpctypes.ErrGRPCPermissionDenied.Error()}
			s.reply(deny)
			s.reply(deny)
			for _, f := range []firing{refused, waiter} {
				err := f.fired(t)
				var re *RefusedError
				if !errors.As(err, &re) || !errors.Is(err, rpctypes.ErrPermissionDenied) || re.Reason != deny.CancelReason {
					t.Errorf("fired with %v, want a *RefusedError wrapping ErrPermissionDenied with etcd's reason", err)
				}
			}
			s.silent() // no cancel: etcd has no such watch
			h.noStream()
			s.deleted(co, 9)
			if err := other.fired(t); err != nil {
				t.Errorf("the other watch fired with %v", err)
			}
		})
	})
	t.Run("invalid token", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t)
			refused, waiter := newFiring(), newFiring()
			h.mux.WatchKey("held", 3, 2, 0, refused.fire)
			s := h.stream()
			s.create()
			s.reply(&pb.WatchResponse{Header: &pb.ResponseHeader{}, WatchId: -1, Created: true, Canceled: true, CancelReason: rpctypes.ErrGRPCInvalidAuthToken.Error()})
			s.closed()
			h.mux.WatchFromNow("pred", waiter.fire, nil)
			h.step(minBackoff)
			s2 := h.stream()
			c := s2.create()
			if string(c.Key) != "pred" {
				t.Fatalf("created %q first, want pred", c.Key)
			}
			r := h.read()
			if diff := cmp.Diff([]string{"held"}, r.keys); diff != "" {
				t.Errorf("re-read keys (-want +got):\n%s", diff)
			}
			r.answer(20, 2)
			if c := s2.create(); string(c.Key) != "held" || c.StartRevision != 21 {
				t.Errorf("created %v, want held from revision 21", c)
			}
			refused.notFired(t)
			waiter.notFired(t)
		})
	})
}

// Replies that break the protocol replace the stream: a creation reply
// with no create pending, or a watch created under another ID than asked
// (etcd before 3.4 ignores the client's ID).
func TestProtocolErrorsReplaceStream(t *testing.T) {
	for name, reply := range map[string]func(*pb.WatchCreateRequest) *pb.WatchResponse{
		"reply without request": func(c *pb.WatchCreateRequest) *pb.WatchResponse {
			return &pb.WatchResponse{Header: &pb.ResponseHeader{}, WatchId: 99, Created: true}
		},
		"other ID": func(c *pb.WatchCreateRequest) *pb.WatchResponse {
			return &pb.WatchResponse{Header: &pb.ResponseHeader{}, WatchId: c.WatchId + 100, Created: true}
		},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				f := newFiring()
				h.mux.WatchKey("held", 3, 2, 0, f.fire)
				s := h.stream()
				c := s.create()
				if name == "reply without request" {
					s.created(c)
				}
				s.reply(reply(c))
				s.closed()
				h.step(minBackoff)
				s2 := h.stream()
				h.read().answer(20, 2)
				if c2 := s2.create(); c2.StartRevision != 21 {
					t.Errorf("created %v, want the key re-read and watched from 21", c2)
				}
				f.notFired(t)
			})
		})
	}
}
