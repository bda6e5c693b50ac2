package election_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/pkg/v3/proxy"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/election"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/lock"
	"github.com/etcdlock/etcdlock/pkg/lock/lockmetrics"
)

// overlapSeed drives the operator of TestNoOverlapAfterOperatorEnds and of
// its control: which term it ends, how and when.
const overlapSeed = 49

// Whatever ends a term — here an operator deleting the leader key or
// revoking the leader's lease, at a random moment of the term, often
// within the first 100 ms, before the leader watches its key, and one
// time in six while the leader is cut off from etcd, so that it can
// neither hear of it nor delete its tenure key — the next term's
// OnStartedLeading starts only after the old term's context was canceled,
// and tokens rise. Each of 8 elections of two candidates (TTL 2 s) goes
// through 25 such ends.
func TestNoOverlapAfterOperatorEnds(t *testing.T) {
	t.Parallel()
	r := runOverlap(t, overlapConfig{seed: overlapSeed, elections: 8, ends: 25, actWithin: 300 * time.Millisecond, cutOne: 6})
	t.Logf("seed %d: %d operator ends (%d deletes, %d revokes; %d with the leader cut off), %d terms, %d overlaps", overlapSeed,
		r.ends, r.deletes, r.revokes, r.cuts, r.terms, len(r.overlaps))
	t.Logf("the next term started after an operator end: median %v, at most %v (the leader reachable); median %v, at most %v (cut off)",
		median(r.gaps[false]), slices.Max(append(r.gaps[false], 0)), median(r.gaps[true]), slices.Max(append(r.gaps[true], 0)))
	t.Logf("the old term's context ended after it: median %v, at most %v (the leader reachable); median %v, at most %v (cut off)",
		median(r.notices[false]), slices.Max(append(r.notices[false], 0)), median(r.notices[true]), slices.Max(append(r.notices[true], 0)))
	for _, o := range r.overlaps {
		t.Error(o)
	}
	for _, e := range r.reasons {
		t.Error(e)
	}
	if r.ends < 200 {
		t.Errorf("%d operator ends, want at least 200", r.ends)
	}
}

// The negative control of TestNoOverlapAfterOperatorEnds: electors
// without tenure keys, whose successors do not wait after an unclean end
// and which do not prove their keys (the design before the wait), start
// the next term while the old one runs, and the check says so.
func TestNoOverlapCheckCanFail(t *testing.T) {
	t.Parallel()
	r := runOverlap(t, overlapConfig{seed: overlapSeed, elections: 2, ends: 12, actWithin: 60 * time.Millisecond, cutOne: 6, control: true})
	t.Logf("control, seed %d: %d operator ends (%d with the leader cut off), %d terms, %d overlaps, by up to %v", overlapSeed,
		r.ends, r.cuts, r.terms, len(r.overlaps), r.maxOverlap)
	if len(r.overlaps) == 0 {
		t.Errorf("negative control: electors without tenure keys never overlapped in %d operator ends; the check is blind", r.ends)
	}
}

type overlapConfig struct {
	seed      uint64
	elections int           // run side by side, each with two candidates
	ends      int           // operator ends per election
	actWithin time.Duration // the operator acts this long after a term starts, at most
	cutOne    int           // one end in cutOne, at random, cuts the leader off from etcd first
	control   bool          // the electors without tenure keys
}

// termRec is one term as its candidate saw it.
type termRec struct {
	who        string
	token      fencing.Token
	key        string
	start, end time.Time     // end: when OnStartedLeading saw its context end; zero until then
	lost       error         // what Metrics.StoppedLeading was told
	stopped    bool          // Metrics.StoppedLeading was called
	ended      string        // "delete" or "revoke" when the operator ended it
	endedAt    time.Time     // when the operator's request was sent
	cut        bool          // the operator cut the leader off from etcd first
	done       chan struct{} // closed once end is set
}

type overlapResult struct {
	ends, deletes, revokes, cuts, terms int
	overlaps, reasons                   []string
	// Per operator end, by whether the leader was cut off: the time until
	// the next term started, until the old term's context ended.
	gaps, notices map[bool][]time.Duration
	maxOverlap    time.Duration // how early a term started at most, of those with an end
}

// runOverlap runs cfg's elections, each driven by an operator that ends
// terms, and checks every election's terms.
func runOverlap(t *testing.T, cfg overlapConfig) overlapResult {
	var (
		mu    sync.Mutex
		terms = make([][]*termRec, cfg.elections)
		wg    sync.WaitGroup
	)
	for i := range cfg.elections {
		pfx := fmt.Sprintf("%se%d/", prefix(t), i)
		started := make(chan *termRec, 16)
		proxies := map[string]proxy.Server{}
		for j, id := range []string{fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", i)} {
			m := &termMetrics{mu: &mu}
			cb := election.Callbacks{OnStartedLeading: func(ctx context.Context, term election.Term) {
				rec := &termRec{who: id, token: term.Token, key: term.Key, start: time.Now(), done: make(chan struct{})}
				mu.Lock()
				terms[i] = append(terms[i], rec)
				m.cur = rec
				mu.Unlock()
				started <- rec
				<-ctx.Done()
				end := time.Now()
				mu.Lock()
				rec.end = end
				mu.Unlock()
				close(rec.done)
			}}
			// Each candidate through a proxy of its own, which the
			// operator may cut.
			p, url := etcdtest.Proxy(t, cluster.Endpoints()[(i+j)%len(cluster.Endpoints())])
			proxies[id] = p
			ecfg := cand{Identity: id, Prefix: pfx, TTL: 2 * time.Second, Config: election.Config{Client: etcdtest.Client(t, url), Callbacks: cb, Metrics: m}}
			if cfg.control {
				ecfg.Config = election.WithoutTenure(ecfg.Config)
			}
			start(t, ecfg)
		}
		rng := rand.New(rand.NewPCG(cfg.seed, uint64(i)))
		cli := etcdtest.Client(t, cluster.Endpoints()...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			operate(t, cli, proxies, rng, cfg, started, &mu)
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	mu.Lock()
	defer mu.Unlock()
	r := overlapResult{gaps: map[bool][]time.Duration{}, notices: map[bool][]time.Duration{}}
	for i, ts := range terms {
		r.terms += len(ts)
		o, most := overlaps(fmt.Sprintf("election %d", i), ts)
		r.overlaps, r.maxOverlap = append(r.overlaps, o...), max(r.maxOverlap, most)
		sort.Slice(ts, func(a, b int) bool { return ts[a].start.Before(ts[b].start) })
		for j, tr := range ts {
			if tr.ended == "" {
				continue
			}
			r.ends++
			if tr.ended == "delete" {
				r.deletes++
			} else {
				r.revokes++
			}
			if tr.cut {
				r.cuts++
			}
			if !tr.end.IsZero() {
				r.notices[tr.cut] = append(r.notices[tr.cut], tr.end.Sub(tr.endedAt))
			}
			if j+1 < len(ts) {
				r.gaps[tr.cut] = append(r.gaps[tr.cut], ts[j+1].start.Sub(tr.endedAt))
			}
			if e := reasonMismatch(tr); e != "" {
				r.reasons = append(r.reasons, fmt.Sprintf("election %d: %s", i, e))
			}
		}
	}
	return r
}

// operate ends cfg.ends terms of one election, each a random moment
// within cfg.actWithin after it started, by deleting its key (compared on
// its token) or revoking its lease; one time in cfg.cutOne it first cuts
// the leader off from etcd (its proxy in proxies), and lets it back once
// the term's context has ended.
func operate(t *testing.T, cli *clientv3.Client, proxies map[string]proxy.Server, rng *rand.Rand, cfg overlapConfig, started <-chan *termRec, mu *sync.Mutex) {
	ctx := context.Background()
	for done := 0; done < cfg.ends; {
		rec, ok := newestTerm(started, 30*time.Second)
		if !ok {
			t.Errorf("%s: no term started within 30s after %d operator ends", slices.Sorted(maps.Keys(proxies)), done)
			return
		}
		time.Sleep(time.Duration(rng.Int64N(int64(cfg.actWithin)))) // the moment of the fault
		mu.Lock()
		running := rec.end.IsZero()
		mu.Unlock()
		if !running {
			continue // ended on its own: the next term is the operator's
		}
		p := proxies[rec.who]
		cut := rng.IntN(cfg.cutOne) == 0
		if cut {
			// Paused, not dropped: TCP delivers what waited once it
			// resumes, and the client's streams survive.
			p.PauseTx()
			p.PauseRx()
		}
		action, sent := "delete", time.Now()
		var acted bool
		if rng.IntN(2) == 0 {
			resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(rec.key), "=", int64(rec.token))).
				Then(clientv3.OpDelete(rec.key)).Commit()
			acted = err == nil && resp.Succeeded
		} else {
			action = "revoke"
			get, err := cli.Get(ctx, rec.key)
			if err == nil && len(get.Kvs) == 1 && get.Kvs[0].CreateRevision == int64(rec.token) {
				sent = time.Now()
				_, err = cli.Revoke(ctx, clientv3.LeaseID(get.Kvs[0].Lease))
				acted = err == nil
			}
		}
		if acted {
			mu.Lock()
			rec.ended, rec.endedAt, rec.cut = action, sent, cut
			mu.Unlock()
			done++
		}
		if cut {
			select { // its deadline ends it
			case <-rec.done:
			case <-time.After(30 * time.Second):
				t.Errorf("the term of %s, cut off, still ran 30s later", rec.who)
			}
			p.UnpauseTx()
			p.UnpauseRx()
		}
	}
}

// median is the median of ds, rounded to the millisecond (0 for none).
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(ds))
	return s[len(s)/2].Round(time.Millisecond)
}

// newestTerm waits for a term to start and returns the newest one sent.
func newestTerm(started <-chan *termRec, timeout time.Duration) (*termRec, bool) {
	var rec *termRec
	select {
	case rec = <-started:
	case <-time.After(timeout):
		return nil, false
	}
	for {
		select {
		case rec = <-started:
		default:
			return rec, true
		}
	}
}

// overlaps reports each term of one election that started before the term
// before it had ended (its context canceled), or whose token did not rise,
// and how early a term started at most.
func overlaps(election string, terms []*termRec) (out []string, most time.Duration) {
	ts := slices.Clone(terms)
	sort.Slice(ts, func(a, b int) bool { return ts[a].start.Before(ts[b].start) })
	for j := 1; j < len(ts); j++ {
		prev, next := ts[j-1], ts[j]
		if prev.end.IsZero() || next.start.Before(prev.end) {
			when := "while its context was live"
			if !prev.end.IsZero() {
				most = max(most, prev.end.Sub(next.start))
				when = fmt.Sprintf("%v before its context ended", prev.end.Sub(next.start))
			}
			out = append(out, fmt.Sprintf("%s: term %v (%s) started after term %v (%s, ended by %s), %s",
				election, next.token, next.who, prev.token, prev.who, cmp.Or(prev.ended, "itself"), when))
		}
		if next.token <= prev.token {
			out = append(out, fmt.Sprintf("%s: term %v follows term %v", election, next.token, prev.token))
		}
	}
	return out, most
}

// reasonMismatch says how the loss a term reported to Metrics disagrees
// with the operator's end of it, if it does. A term may have lost its
// deadline first (TTL 2 s, on a busy machine).
func reasonMismatch(tr *termRec) string {
	if !tr.stopped {
		return ""
	}
	want := map[string]string{"delete": "key_deleted", "revoke": "lease_revoked"}[tr.ended]
	got := lockmetrics.LossReason(tr.lost)
	if tr.lost == nil || got != want && !errors.Is(tr.lost, lock.ErrDeadlinePassed) {
		return fmt.Sprintf("term %v ended by the operator's %s reported loss %q (%v), want %q", tr.token, tr.ended, got, tr.lost, want)
	}
	return ""
}

// termMetrics records each term's loss into its termRec.
type termMetrics struct {
	mu  *sync.Mutex
	cur *termRec
}

func (m *termMetrics) StartedLeading() {}

func (m *termMetrics) StoppedLeading(lost error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cur != nil {
		m.cur.lost, m.cur.stopped = lost, true
	}
}

func (m *termMetrics) LeaseRenewed(time.Duration, error) {}
