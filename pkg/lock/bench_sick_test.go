package lock_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/pkg/v3/proxy"

	"github.com/etcdlock/etcdlock/pkg/embedded"
	"github.com/etcdlock/etcdlock/pkg/etcdtest"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

// BenchmarkSickMember measures, with one follower of a 3-member cluster
// (etcd's default 1 s election timeout) sick and a client that reaches
// every member through a proxy of its own, per trial: a NewSession, an
// uncontended Acquire, and a handoff — from the holder's Release to the
// return of the Acquire queued behind it — to a waiter that queued while
// the cluster was healthy. The holder reaches the healthy members only.
// Sick is "frozen" (the follower's proxy delivers nothing either way,
// connections stay open) or "cut-off" (the follower cut off from its
// peers; clients still reach it). An operation that fails, or takes
// longer than sickOpBound, counts as sickOpBound. Run with -benchtime 1x;
// SICK_TRIALS trials per case (default 10), SICK_CASES a subset
// (healthy,frozen,cut-off).
func BenchmarkSickMember(b *testing.B) {
	trials := 10
	if n, err := strconv.Atoi(os.Getenv("SICK_TRIALS")); err == nil && n > 0 {
		trials = n
	}
	cases := []string{"healthy", "frozen", "cut-off"}
	if env := os.Getenv("SICK_CASES"); env != "" {
		cases = slices.DeleteFunc(cases, func(c string) bool { return !slices.Contains(strings.Split(env, ","), c) })
	}
	for _, sick := range cases {
		b.Run(sick, func(b *testing.B) {
			c := etcdtest.Cluster(b, embedded.WithMembers(3))
			leader, err := c.Leader(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			var follower *embedded.Member
			var healthy []string
			var urls []string
			var fp proxy.Server
			for _, m := range c.Members() {
				p, url := etcdtest.Proxy(b, m.Endpoint())
				urls = append(urls, url)
				if m != leader && follower == nil {
					follower, fp = m, p
				} else {
					healthy = append(healthy, m.Endpoint())
				}
			}
			all := etcdtest.Client(b, urls...)
			holders := etcdtest.Client(b, healthy...)
			fall, heal := sickness(sick, c, follower, fp)
			var newSession, acquire, handoff []time.Duration
			for trial := range trials {
				pfx := fmt.Sprintf("/bench/sick/%s/%d/", sick, trial)
				hs, err := lock.NewSession(context.Background(), holders, lock.WithPrefix(pfx))
				if err != nil {
					b.Fatal(err)
				}
				ws, err := lock.NewSession(context.Background(), all, lock.WithPrefix(pfx))
				if err != nil {
					b.Fatal(err)
				}
				held, err := hs.Acquire(context.Background(), "job")
				if err != nil {
					b.Fatal(err)
				}
				got := make(chan time.Time, 1)
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), sickOpBound)
					defer cancel()
					if l, err := ws.Acquire(ctx, "job"); err == nil {
						got <- time.Now()
						_ = l.Release(ctx)
					} else {
						b.Logf("trial %d: waiter: %v", trial, err)
						got <- time.Time{}
					}
				}()
				waitKeys(b, holders, pfx, 2)
				time.Sleep(200 * time.Millisecond) // the waiter's watch is created
				fall()
				time.Sleep(time.Duration(trial%5) * 300 * time.Millisecond) // varied points of the sickness's onset

				released := time.Now()
				if err := held.Release(context.Background()); err != nil {
					b.Fatal(err)
				}
				handoff = append(handoff, took(released, <-got))

				start := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), sickOpBound)
				s, err := lock.NewSession(ctx, all, lock.WithPrefix(pfx))
				newSession = append(newSession, tookErr(start, err))
				if err == nil {
					start = time.Now()
					l, err := s.Acquire(ctx, "free")
					acquire = append(acquire, tookErr(start, err))
					if err == nil {
						_ = l.Release(ctx)
					}
					s.Abandon()
				}
				cancel()
				heal()
				hs.Abandon()
				ws.Abandon()
			}
			report(b, "new-session", newSession)
			report(b, "acquire", acquire)
			report(b, "handoff", handoff)
		})
	}
}

// sickOpBound bounds each operation BenchmarkSickMember measures.
const sickOpBound = 30 * time.Second

// sickness returns how to make follower sick and heal it again.
func sickness(sick string, c *embedded.Cluster, follower *embedded.Member, p proxy.Server) (fall, heal func()) {
	switch sick {
	case "frozen":
		return func() { p.PauseTx(); p.PauseRx() }, func() { p.UnpauseTx(); p.UnpauseRx() }
	case "cut-off":
		e := follower.Etcd().Server
		cut := func(on bool) {
			for _, o := range c.Members() {
				if o == follower {
					continue
				}
				oe := o.Etcd().Server
				if on {
					e.CutPeer(oe.MemberID())
					oe.CutPeer(e.MemberID())
				} else {
					e.MendPeer(oe.MemberID())
					oe.MendPeer(e.MemberID())
				}
			}
		}
		return func() { cut(true) }, func() { cut(false); time.Sleep(2 * time.Second) } // the follower catches up
	}
	return func() {}, func() {}
}

// waitKeys waits until n keys exist under pfx.
func waitKeys(b *testing.B, cli *clientv3.Client, pfx string, n int) {
	b.Helper()
	for range 600 {
		resp, err := cli.Get(context.Background(), pfx, clientv3.WithPrefix())
		if err == nil && len(resp.Kvs) >= n {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.Fatalf("fewer than %d keys under %s after 30 s", n, pfx)
}

func took(start, end time.Time) time.Duration {
	if end.IsZero() || end.Sub(start) > sickOpBound {
		return sickOpBound
	}
	return end.Sub(start)
}

func tookErr(start time.Time, err error) time.Duration {
	if err != nil {
		return sickOpBound
	}
	return took(start, time.Now())
}

// report reports ds's median and 99th percentile (with fewer than 100
// trials, the largest) and logs them all.
func report(b *testing.B, what string, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	p99 := s[min(len(s)-1, (len(s)*99+99)/100-1)]
	b.ReportMetric(float64(s[len(s)/2].Microseconds())/1000, what+"-p50-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, what+"-p99-ms")
	b.Logf("%s: %v", what, ds)
}
