package main

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/pkg/etcdtest"
)

// With two endpoints, one of which holds every request unanswered (a
// frozen member), each check of checkTries is answered within its
// context: a try the frozen endpoint holds is given up and sent again,
// to the other. The control, one try bounded only by the context, is
// held to its end by the frozen endpoint at least once in as many calls:
// the check can fail.
func TestCheckTriesMovesOnFromAFrozenEndpoint(t *testing.T) {
	c := etcdtest.Cluster(t)
	p, frozen := etcdtest.Proxy(t, c.Endpoints()[0])
	cli := etcdtest.Client(t, frozen, c.Endpoints()[0])
	ops := []clientv3.Op{clientv3.OpPut("/checktries/k", "v")}
	// Both connections are up before the freeze, so that the client's
	// round robin picks the frozen one in turn.
	for i := range 4 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := cli.Txn(ctx).Then(ops...).Commit()
		cancel()
		if err != nil {
			t.Fatalf("put %d before the freeze: %v", i, err)
		}
	}
	p.PauseTx()
	p.PauseRx()
	defer func() { p.UnpauseTx(); p.UnpauseRx() }()

	const calls = 6
	held := 0
	for range calls {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err := cli.Txn(ctx).Then(ops...).Commit()
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			held++
		}
	}
	if held == 0 {
		t.Fatalf("control: no single try was held by the frozen endpoint in %d calls: the check below cannot fail", calls)
	}
	for i := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := checkTries(ctx, cli, ops)
		cancel()
		if err != nil {
			t.Errorf("check %d: %v", i, err)
		}
	}
}
