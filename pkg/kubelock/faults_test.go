package kubelock

import (
	"bytes"
	"context"
	"errors"
	"math/rand"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/client-go/tools/leaderelection"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/kubelock/internal/kubetest"

	"github.com/etcdlock/etcdlock/pkg/lock"
)

// Faults the elector tests do not cover: lost replies, a Close racing a
// call, a late callback, an elector that stops leading without a release,
// compaction, and random faults under a seed.

// The raw bytes change on every renewal, also after one whose reply was
// lost: client-go's tryAcquireOrRenew computes its record once, so a
// fast-path Update whose reply is lost is followed by a Get and a
// slow-path Update of the same record.
func TestLostRenewalReplyStillChangesRawBytes(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	kv := &faultKV{KV: cli.KV}
	cli.KV = kv
	a := newLock(t, cli, "a")
	ctx := ctxT(t)
	rec := record("a")
	create(t, ctx, a)
	kv.loseNext.Store(true)
	if err := a.Update(ctx, rec); err == nil {
		t.Fatal("the injected lost reply did not surface")
	}
	_, raw1, err := a.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Update(ctx, rec); err != nil {
		t.Fatal(err)
	}
	_, raw2, err := a.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(raw1, raw2) {
		t.Errorf("two successful renewals stored identical bytes: %s", raw2)
	}
}

// A Create in flight when Close is called cleans up before it returns: it
// revokes the lease it granted (its record goes with it), and no goroutine
// of the lock runs after Close returned.
func TestCreateDuringCloseCleansUp(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	kv := &faultKV{KV: cli.KV, block: make(chan struct{}), blocked: make(chan struct{}, 1)}
	cli.KV = kv
	a := newLock(t, cli, "a")
	ctx := ctxT(t)
	errc := make(chan error, 1)
	go func() { errc <- a.Create(ctx, record("a")) }()
	<-kv.blocked
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	kv.mu.Lock()
	close(kv.block)
	kv.block = nil
	kv.mu.Unlock()
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Errorf("Create during Close = %v, want ErrClosed", err)
	}
	resp, err := cli.Get(ctx, a.Key())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 0 {
		t.Errorf("record left after Close and the in-flight Create: %s", resp.Kvs[0].Value)
	}
}

// client-go starts OnStartedLeading in a goroutine: one that runs late —
// here after the elector lost its term and started another — gets a done
// context, and never the next term with a live one: at most one callback
// context is live at a time, and it is the latest term's.
func TestLateCallbackGetsADoneContext(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	a := newLock(t, cli, "a")
	type call struct {
		token fencing.Token
		live  bool
	}
	calls := make(chan call, 4)
	lead := a.Lead(func(ctx context.Context, term Term) {
		calls <- call{term.Token(), ctx.Err() == nil}
		<-ctx.Done()
	})
	var n atomic.Int32
	stop := runElector(t, leaderelection.LeaderElectionConfig{
		Lock: a, LeaseDuration: 4 * time.Second, RenewDeadline: time.Second, RetryPeriod: 200 * time.Millisecond,
		Name: "ctl",
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				if n.Add(1) == 1 {
					time.Sleep(2500 * time.Millisecond) // the scheduler runs it late
				}
				lead(ctx)
			},
			OnStoppedLeading: func() {},
		},
	})
	defer stop()
	var first Term
	etcdtest.Eventually(t, 5*time.Second, func() bool { tm, err := a.Term(); first = tm; return err == nil }, "first term")
	if _, err := cli.Delete(ctxT(t), a.Key()); err != nil {
		t.Fatal(err)
	}
	var got []call
	for len(got) < 2 {
		select {
		case c := <-calls:
			got = append(got, c)
		case <-time.After(8 * time.Second):
			t.Fatalf("calls %+v", got)
		}
	}
	latest := mustTerm(t, a)
	live := 0
	for _, c := range got {
		if c.live {
			live++
			if c.token != latest.Token() || c.token == first.Token() {
				t.Errorf("a live callback got token %v; the first term was %v, the latest is %v", c.token, first.Token(), latest.Token())
			}
		}
	}
	if live > 1 {
		t.Errorf("%d callbacks started with live contexts: %+v", live, got)
	}
}

// When client-go stops leading without a release — here its calls hang
// past RenewDeadline, well within the TTL — the term ends with it: the
// next leadership of the re-run elector is a new term with a new token.
func TestTermEndsWhenTheElectorStopsLeading(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	a := newLock(t, cli, "a", lock.WithTTL(6*time.Second))
	fr := kubetest.NewGate(a)
	tokens := make(chan fencing.Token, 4)
	stopped := make(chan struct{}, 4)
	stop := runElector(t, leaderelection.LeaderElectionConfig{
		Lock: fr, LeaseDuration: 8 * time.Second, RenewDeadline: time.Second, RetryPeriod: 200 * time.Millisecond,
		Name: "ctl",
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: a.Lead(func(ctx context.Context, term Term) { tokens <- term.Token(); <-ctx.Done() }),
			OnStoppedLeading: func() { stopped <- struct{}{} },
		},
	})
	defer func() { fr.Heal(); stop() }()
	first := <-tokens
	fr.Cut() // the elector's calls hang (slow etcd) past RenewDeadline
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("elector did not stop leading")
	}
	tm := mustTerm(t, a)
	if cause := context.Cause(tm.Context()); !errors.Is(cause, ErrStoppedLeading) {
		t.Errorf("after OnStoppedLeading the term's cause is %v, want ErrStoppedLeading", cause)
	}
	fr.Heal()
	// Not released (ReleaseOnCancel false): the record stays until its
	// lease expires, a TTL after the last renewal.
	select {
	case second := <-tokens:
		if second == first {
			t.Errorf("OnStoppedLeading, then a new OnStartedLeading with the same token %v", second)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no second leadership")
	}
}

// The record is deleted and replaced while the holder is disconnected, and
// etcd compacts that history: the reconnected watch is told it was
// compacted, and the re-read ends the term. Not parallel: a compaction of
// the shared cluster cuts off the watches of the tests beside it.
func TestCompactionWhileDisconnectedEndsTheTerm(t *testing.T) {
	p, url := etcdtest.Proxy(t, cluster.Endpoints()[0])
	cli := etcdtest.Client(t, cluster.Endpoints()...)
	a := newLock(t, etcdtest.Client(t, url), "a", lock.WithTTL(10*time.Second))
	ctx := ctxT(t)
	ta := create(t, ctx, a)
	// Paused first, so that Close drops the connection at once rather than
	// when it next carries a renewal (see etcdtest.RestartProxy); renewals
	// lost meanwhile could let the deadline end the term first.
	p.PauseTx()
	p.Close()
	if _, err := cli.Delete(ctx, a.Key()); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Put(ctx, a.Key(), `{"holderIdentity":"x"}`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	etcdtest.RestartProxy(t, p)
	cause := waitEnded(t, ta, 6*time.Second)
	if !errors.Is(cause, ErrRecordGone) {
		t.Errorf("cause %v", cause)
	}
}

// Random faults (seed KUBELOCK_SEED, default 1; KUBELOCK_ROUNDS rounds,
// default 10) among three client-go electors, one with a LeaseDuration
// below the TTL: crashes, partitions, delays, paused sends and releases.
// No two callback contexts overlap and tokens rise (the check's negative
// control is TestLeaderElectorOneLeaderThroughFaults's).
func TestLeaderElectorRandomFaults(t *testing.T) {
	t.Parallel()
	randomFaults(t, false)
}

// TestLeaderElectorRandomFaults with every elector configured by
// ElectionConfig and a plain OnStartedLeading(ctx), as a controller that
// keeps its elector and swaps its lock has it; the same knobs. With 50
// rounds or more, client-go's own contexts must overlap a later term at
// least once: the check's negative control on the same run.
func TestElectionConfigRandomFaults(t *testing.T) {
	t.Parallel()
	randomFaults(t, true)
}

func randomFaults(t *testing.T, viaConfig bool) {
	seed, rounds := kubetest.EnvInt(t, "KUBELOCK_SEED", 1), kubetest.EnvInt(t, "KUBELOCK_ROUNDS", 10)
	t.Logf("seed %d, %d rounds (replay: KUBELOCK_SEED=%d go test -run %s)", seed, rounds, seed, t.Name())
	rnd := rand.New(rand.NewSource(int64(seed)))
	lg := newLedger()
	short := timings{ttl: 2 * time.Second, leaseDuration: time.Second, renewDeadline: 800 * time.Millisecond, retryPeriod: 300 * time.Millisecond}
	cands := []*contender{
		startContenderWith(t, lg, "c0", 0, testTimings, viaConfig),
		startContenderWith(t, lg, "c1", 1, testTimings, viaConfig),
		startContenderWith(t, lg, "c2", 2, short, viaConfig),
	}
	for round := range rounds {
		var victim *contender
		if cur := lg.current(); cur != nil && rnd.Intn(4) > 0 {
			for _, c := range cands {
				if c.who == cur.who {
					victim = c
				}
			}
		} else {
			victim = cands[rnd.Intn(len(cands))]
		}
		d := time.Duration(300+rnd.Intn(3500)) * time.Millisecond
		lat := time.Duration(200+rnd.Intn(2300)) * time.Millisecond
		fault := []string{"crash", "partition", "delayRx", "delayTx", "delayBoth", "pauseTx", "release"}[rnd.Intn(7)]
		t.Logf("round %d: %s of %s for %v (latency %v)", round, fault, victim.who, d, lat)
		switch fault {
		case "crash":
			victim.crash()
		case "partition":
			victim.partition()
		case "delayRx":
			victim.proxy.DelayRx(lat, lat/4)
		case "delayTx":
			victim.proxy.DelayTx(lat, lat/4)
		case "delayBoth":
			victim.proxy.DelayRx(lat/2, lat/8)
			victim.proxy.DelayTx(lat/2, lat/8)
		case "pauseTx":
			victim.proxy.PauseTx()
		case "release":
			victim.stop()
		}
		time.Sleep(d)
		switch fault {
		case "delayRx", "delayTx", "delayBoth":
			victim.proxy.UndelayRx()
			victim.proxy.UndelayTx()
		case "pauseTx":
			victim.proxy.UnpauseTx()
		case "release":
			victim.start(t, lg)
		}
		victim.heal()
		time.Sleep(time.Duration(rnd.Intn(1500)) * time.Millisecond)
	}
	for _, c := range cands {
		c.stop()
	}
	lg.wg.Wait()
	lg.mu.Lock()
	defer lg.mu.Unlock()
	t.Logf("%d terms", len(lg.terms))
	for _, bad := range overlaps(lg.terms, func(r *led) time.Time { return r.end }) {
		t.Error(bad)
	}
	if !viaConfig {
		return
	}
	clientGo := overlaps(lg.terms, func(r *led) time.Time { return r.clientGoEnd })
	t.Logf("client-go's own contexts overlapped a later term %d times", len(clientGo))
	if rounds >= 50 && len(clientGo) == 0 {
		t.Error("client-go's own contexts never overlapped a later term: the overlap check cannot fail")
	}
}
