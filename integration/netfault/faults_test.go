package netfault

import (
	"context"
	"syscall"
	"time"
)

// target is what a fault is injected into: the cluster's leader and a
// follower as found before the fault, and the client whose link it cuts.
type target struct {
	leader, follower int // member indexes
	client           string
	seed             uint64 // the relay's
}

// fault is one kind of fault: inject starts it, and the heal it returns
// ends it. A fault with a nil inject injects nothing.
type fault struct {
	name   string
	inject func(ctx context.Context, h *harness, tg target) (heal func() error, err error)
	// control runs the client that ignores its deadline: its trials must
	// show an overlap.
	control bool
	// member is true for the sick-member faults, whose probe timings the
	// table gives.
	member bool
}

// faults lists every kind, in the table's order.
func faults() []fault {
	freeze := func(leader bool) func(context.Context, *harness, target) (func() error, error) {
		return func(_ context.Context, h *harness, tg target) (func() error, error) {
			p := h.cluster.procs[pick(leader, tg)]
			p.signal(syscall.SIGSTOP)
			return func() error { p.signal(syscall.SIGCONT); return nil }, nil
		}
	}
	kill := func(leader bool) func(context.Context, *harness, target) (func() error, error) {
		return func(ctx context.Context, h *harness, tg target) (func() error, error) {
			i := pick(leader, tg)
			h.cluster.procs[i].kill()
			return func() error {
				ctx, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				return h.cluster.restart(ctx, i)
			}, nil
		}
	}
	// isolate cuts member or client a from every other node; out and in
	// choose the directions.
	isolate := func(a string, out, in bool, h *harness) (func() error, error) {
		for _, nd := range h.net.nodes {
			if nd.name == a {
				continue
			}
			if out {
				if err := h.net.cut(a, nd.name); err != nil {
					return nil, err
				}
			}
			if in {
				if err := h.net.cut(nd.name, a); err != nil {
					return nil, err
				}
			}
		}
		return h.net.heal, nil
	}
	cutMember := func(leader, out, in bool) func(context.Context, *harness, target) (func() error, error) {
		return func(_ context.Context, h *harness, tg target) (func() error, error) {
			return isolate(h.cluster.nodes[pick(leader, tg)].name, out, in, h)
		}
	}
	cutClient := func(out, in bool) func(context.Context, *harness, target) (func() error, error) {
		return func(_ context.Context, h *harness, tg target) (func() error, error) {
			// Only from the members: the client's own namespace still
			// reaches nothing else anyway.
			for _, m := range h.cluster.nodes {
				if out {
					if err := h.net.cut(tg.client, m.name); err != nil {
						return nil, err
					}
				}
				if in {
					if err := h.net.cut(m.name, tg.client); err != nil {
						return nil, err
					}
				}
			}
			return h.net.heal, nil
		}
	}
	shapeMember := func(leader bool, sh linkShape) func(context.Context, *harness, target) (func() error, error) {
		return func(_ context.Context, h *harness, tg target) (func() error, error) {
			return h.shapeLink(h.cluster.nodes[pick(leader, tg)].name, sh, tg.seed)
		}
	}
	shapeClient := func(sh linkShape) func(context.Context, *harness, target) (func() error, error) {
		return func(_ context.Context, h *harness, tg target) (func() error, error) {
			return h.shapeLink(tg.client, sh, tg.seed)
		}
	}
	slow := linkShape{delay: 200 * time.Millisecond, jitter: 50 * time.Millisecond}
	return []fault{
		{name: "none", member: true},
		{name: "frozen-follower", inject: freeze(false), member: true},
		{name: "frozen-leader", inject: freeze(true), member: true},
		{name: "killed-follower", inject: kill(false), member: true},
		{name: "killed-leader", inject: kill(true), member: true},
		{name: "cut-follower", inject: cutMember(false, true, true), member: true},
		{name: "cut-leader", inject: cutMember(true, true, true), member: true},
		{name: "leader-mute", inject: cutMember(true, true, false), member: true},
		{name: "leader-deaf", inject: cutMember(true, false, true), member: true},
		{name: "slow-follower", inject: shapeMember(false, slow), member: true},
		{name: "slow-leader", inject: shapeMember(true, slow), member: true},
		{name: "lossy-leader", inject: shapeMember(true, linkShape{jitter: 5 * time.Millisecond, loss: 0.05, dup: 0.02}), member: true},
		{name: "cut-client", inject: cutClient(true, true)},
		{name: "client-mute", inject: cutClient(true, false)},
		{name: "client-deaf", inject: cutClient(false, true)},
		{name: "slow-lossy-client", inject: shapeClient(linkShape{delay: 300 * time.Millisecond, jitter: 100 * time.Millisecond, loss: 0.1})},
		{name: "control-no-deadline", control: true},
	}
}

func pick(leader bool, tg target) int {
	if leader {
		return tg.leader
	}
	return tg.follower
}
