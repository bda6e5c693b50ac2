package etcdfence_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/fencing/etcdfence"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// prefix is t's own key prefix: the tests may share an etcd
// (etcdtest.Endpoints).
func prefix(t *testing.T) string { return "/etcdfence-test/" + t.Name() + "/" }

func TestStaleOwnerWriteNeverCommits(t *testing.T) {
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
	la, err := a.Acquire(ctx, "res")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := etcdfence.Commit(ctx, cli, la.Key(), la.Token(), clientv3.OpPut(pfx+"data", "a1")); err != nil {
		t.Fatalf("owner's write: %v", err)
	}
	// a's lease expires (revoked here); b takes over.
	if _, err := cli.Revoke(ctx, a.Lease()); err != nil {
		t.Fatal(err)
	}
	b, err := lock.NewSession(ctx, cli, lock.WithPrefix(pfx))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	lb, err := b.Acquire(ctx, "res")
	if err != nil {
		t.Fatal(err)
	}
	_, err = etcdfence.Commit(ctx, cli, la.Key(), la.Token(), clientv3.OpPut(pfx+"data", "a2-stale"))
	var stale *fencing.StaleTokenError
	if !errors.As(err, &stale) || stale.Presented != la.Token() || stale.Current != lb.Token() {
		t.Fatalf("stale write = %v, want StaleTokenError current=%v", err, lb.Token())
	}
	if _, err := etcdfence.Commit(ctx, cli, lb.Key(), lb.Token(), clientv3.OpPut(pfx+"data", "b1")); err != nil {
		t.Fatalf("new owner's write: %v", err)
	}
	got, err := cli.Get(ctx, pfx+"data")
	if err != nil || string(got.Kvs[0].Value) != "b1" {
		t.Fatalf("/data = %v %v, want b1", got, err)
	}
	if _, err := etcdfence.Commit(ctx, cli, lb.Key(), 0); !errors.Is(err, fencing.ErrInvalidToken) {
		t.Errorf("zero token: %v", err)
	}
}

// Owners take turns; after each release, the former owner keeps writing
// with its old token while the next owner writes. Every write a former
// owner makes must be rejected, every current owner's write must commit,
// and the data ends with the last owner's token.
func TestConcurrentOwnersAndStaleWriters(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	eps, pfx := etcdtest.Endpoints(t), prefix(t)
	cli := etcdtest.Client(t, eps...)
	const owners, rounds, writes = 4, 5, 5
	var (
		mu                                      sync.Mutex
		attempted, staleRejected, staleAccepted int
		last                                    fencing.Token
		wg                                      sync.WaitGroup
	)
	for range owners {
		s, err := lock.NewSession(ctx, cli, lock.WithPrefix(pfx))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(ctx)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				l, err := s.Acquire(ctx, "res")
				if err != nil {
					t.Error(err)
					return
				}
				for range writes {
					if _, err := etcdfence.Commit(ctx, cli, l.Key(), l.Token(), clientv3.OpPut(pfx+"data", l.Token().String())); err != nil {
						t.Errorf("owner's write rejected: %v", err)
					}
				}
				mu.Lock()
				last = l.Token()
				mu.Unlock()
				if err := l.Release(ctx); err != nil {
					t.Error(err)
					return
				}
				for range writes { // late writes, racing the next owner's
					_, err := etcdfence.Commit(ctx, cli, l.Key(), l.Token(), clientv3.OpPut(pfx+"data", "stale"))
					mu.Lock()
					attempted++
					switch {
					case err == nil:
						staleAccepted++
					case errors.Is(err, fencing.ErrStaleToken):
						staleRejected++
					default:
						t.Error(err)
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("stale writes attempted %d, rejected %d, accepted %d", attempted, staleRejected, staleAccepted)
	if staleAccepted != 0 {
		t.Errorf("%d stale writes accepted", staleAccepted)
	}
	got, err := cli.Get(ctx, pfx+"data")
	if err != nil || string(got.Kvs[0].Value) != last.String() {
		t.Errorf("/data = %v %v, want last owner's token %v", got.Kvs, err, last)
	}
}

// Bad arguments are errors before any request, never a panic.
func TestCommitRejectsBadArguments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	eps, pfx := etcdtest.Endpoints(t), prefix(t)
	cli := etcdtest.Client(t, eps...)
	for _, tc := range []struct {
		name  string
		cli   *clientv3.Client
		key   string
		token fencing.Token
		want  error
	}{
		{"nil client", nil, "/etcdlock/a/1", 5, etcdfence.ErrInvalidArgument},
		{"empty key", cli, "", 5, etcdfence.ErrInvalidArgument},
		{"zero token", cli, "/etcdlock/a/1", 0, fencing.ErrInvalidToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := etcdfence.Commit(ctx, tc.cli, tc.key, tc.token, clientv3.OpPut(pfx+"data", "x"))
			if !errors.Is(err, tc.want) || resp != nil {
				t.Fatalf("Commit = %v, %v; want an error wrapping %v", resp, err, tc.want)
			}
		})
	}
	if resp, _ := cli.Get(ctx, pfx+"data"); len(resp.Kvs) != 0 {
		t.Fatalf("a rejected Commit wrote /data")
	}
}

// Commit's error says whether etcd answered: a request cut off from etcd
// may have been applied (ErrOutcomeUnknown), one etcd refused was not.
func TestCommitErrorSaysWhetherEtcdAnswered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	eps, pfx := etcdtest.Endpoints(t), prefix(t)
	p, url := etcdtest.Proxy(t, eps[0])
	cli := etcdtest.Client(t, url)
	s, err := lock.NewSession(ctx, cli, lock.WithPrefix(pfx))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Abandon()
	l, err := s.Acquire(ctx, "res")
	if err != nil {
		t.Fatal(err)
	}
	many := make([]clientv3.Op, 129) // above etcd's default --max-txn-ops
	for i := range many {
		many[i] = clientv3.OpPut(fmt.Sprintf("%sdata/%d", pfx, i), "x")
	}
	if _, err := etcdfence.Commit(ctx, cli, l.Key(), l.Token(), many...); err == nil || errors.Is(err, etcdfence.ErrOutcomeUnknown) {
		t.Errorf("a transaction etcd refused: %v, want etcd's refusal, not ErrOutcomeUnknown", err)
	}
	p.BlackholeTx()
	p.BlackholeRx()
	defer func() { p.UnblackholeTx(); p.UnblackholeRx() }()
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = etcdfence.Commit(cctx, cli, l.Key(), l.Token(), clientv3.OpPut(pfx+"data", "x"))
	if !errors.Is(err, etcdfence.ErrOutcomeUnknown) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a transaction cut off from etcd: %v, want ErrOutcomeUnknown and the context's error", err)
	}
}

// The old holder's writes after a healed partition: until etcd answers
// they fail with ErrOutcomeUnknown, then they are refused as stale —
// never applied.
func TestStaleHolderAfterHealedPartition(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	eps, pfx := etcdtest.Endpoints(t), prefix(t)
	cli := etcdtest.Client(t, eps...)
	p, url := etcdtest.Proxy(t, eps[0])
	aCli := etcdtest.Client(t, url)
	a, err := lock.NewSession(ctx, aCli, lock.WithPrefix(pfx))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Abandon()
	la, err := a.Acquire(ctx, "res")
	if err != nil {
		t.Fatal(err)
	}
	p.BlackholeTx()
	p.BlackholeRx()
	healed := false
	defer func() {
		if !healed {
			p.UnblackholeTx()
			p.UnblackholeRx()
		}
	}()
	if _, err := cli.Revoke(ctx, a.Lease()); err != nil { // a's lease gone; b takes over
		t.Fatal(err)
	}
	b, err := lock.NewSession(ctx, cli, lock.WithPrefix(pfx))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	lb, err := b.Acquire(ctx, "res")
	if err != nil {
		t.Fatal(err)
	}
	p.UnblackholeTx()
	p.UnblackholeRx()
	healed = true
	unknown := 0
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := etcdfence.Commit(cctx, aCli, la.Key(), la.Token(), clientv3.OpPut(pfx+"data", "stale"))
		cancel()
		var stale *fencing.StaleTokenError
		if errors.As(err, &stale) {
			if stale.Current != lb.Token() {
				t.Errorf("refused with current %v, want b's token %v", stale.Current, lb.Token())
			}
			break
		}
		if !errors.Is(err, etcdfence.ErrOutcomeUnknown) {
			t.Fatalf("old holder's write after the partition: %v, want ErrOutcomeUnknown or a StaleTokenError", err)
		}
		if unknown++; unknown == 20 {
			t.Fatalf("20 writes after the partition healed got no answer: %v", err)
		}
	}
	t.Logf("the old holder's writes got %d errors without an answer before the refusal", unknown)
	if got, err := cli.Get(ctx, pfx+"data"); err != nil || len(got.Kvs) != 0 {
		t.Errorf("/data = %v (%v): the stale write was applied", got.Kvs, err)
	}
}
