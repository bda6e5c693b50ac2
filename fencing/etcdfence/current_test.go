package etcdfence_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/fencing/etcdfence"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/kuberecord"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// staleCurrent commits with token under ownerKey, which must be refused,
// and returns the refusal's Current.
func staleCurrent(ctx context.Context, t *testing.T, cli *clientv3.Client, ownerKey string, token fencing.Token) fencing.Token {
	t.Helper()
	_, err := etcdfence.Commit(ctx, cli, ownerKey, token, clientv3.OpPut(ownerKey+"-data", "stale"))
	var stale *fencing.StaleTokenError
	if !errors.As(err, &stale) {
		t.Fatalf("Commit(%q, %d) = %v, want a StaleTokenError", ownerKey, token, err)
	}
	return stale.Current
}

// A lock's stale owner whose session waits for the name again has a key
// under the name, with a newer create revision: the holder is still the
// oldest key, not the owner's own.
func TestStaleCurrentOfALockIsTheOldestContender(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	eps, pfx := etcdtest.Endpoints(t), prefix(t)
	cli := etcdtest.Client(t, eps...)
	a, err := lock.NewSession(ctx, cli, lock.WithPrefix(pfx))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	b, err := lock.NewSession(ctx, cli, lock.WithPrefix(pfx))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	la, err := a.Acquire(ctx, "res")
	if err != nil {
		t.Fatal(err)
	}
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got := staleCurrent(ctx, t, cli, la.Key(), la.Token()); got != 0 {
		t.Errorf("nobody holds: Current = %d, want 0", got)
	}
	lb, err := b.Acquire(ctx, "res")
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Release(ctx)
	waitCtx, stopWaiting := context.WithCancel(ctx)
	waited := make(chan error, 1)
	go func() {
		_, err := a.Acquire(waitCtx, "res")
		waited <- err
	}()
	defer func() { stopWaiting(); <-waited }()
	for {
		// The waiter's key is la's again, created anew.
		resp, err := cli.Get(ctx, la.Key())
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) == 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := staleCurrent(ctx, t, cli, la.Key(), la.Token()); got != lb.Token() {
		t.Errorf("Current = %d, want the holder's %d", got, lb.Token())
	}
}

// A kubelock record is <prefix><name>: the oldest key under the prefix is
// another election's record or a term count, never the name's holder.
func TestStaleCurrentOfAKubeRecordIsTheRecord(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	eps, pfx := etcdtest.Endpoints(t), prefix(t)
	cli := etcdtest.Client(t, eps...)
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Revoke(context.Background(), lease.ID)
	other, mine := pfx+"other", pfx+"mine"
	for _, k := range []string{kuberecord.TermsKey(other), other, kuberecord.TermsKey(mine)} {
		if _, err := cli.Put(ctx, k, "{}", clientv3.WithLease(lease.ID)); err != nil {
			t.Fatal(err)
		}
	}
	if got := staleCurrent(ctx, t, cli, mine, 1); got != 0 {
		t.Errorf("no record: Current = %d, want 0", got)
	}
	put, err := cli.Put(ctx, mine, "{}", clientv3.WithLease(lease.ID))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := staleCurrent(ctx, t, cli, mine, fencing.Token(put.Header.Revision-1)), fencing.Token(put.Header.Revision); got != want {
		t.Errorf("Current = %d, want the record's %d", got, want)
	}
}

// A plain key is its own holder, whatever else its directory holds.
func TestStaleCurrentOfAPlainKeyIsTheKey(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	eps, pfx := etcdtest.Endpoints(t), prefix(t)
	cli := etcdtest.Client(t, eps...)
	if _, err := cli.Put(ctx, pfx+"older", "x"); err != nil {
		t.Fatal(err)
	}
	put, err := cli.Put(ctx, pfx+"owner", "x")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := staleCurrent(ctx, t, cli, pfx+"owner", fencing.Token(put.Header.Revision-1)), fencing.Token(put.Header.Revision); got != want {
		t.Errorf("Current = %d, want the key's %d", got, want)
	}
	// A key with no '/' reads no directory.
	top := "etcdfence-test-" + t.Name()
	created, err := cli.Put(ctx, top, "x")
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Delete(context.Background(), top)
	put, err = cli.Put(ctx, top, "y")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := staleCurrent(ctx, t, cli, top, fencing.Token(put.Header.Revision)), fencing.Token(created.Header.Revision); got != want {
		t.Errorf("Current = %d, want the key's create revision %d", got, want)
	}
}
