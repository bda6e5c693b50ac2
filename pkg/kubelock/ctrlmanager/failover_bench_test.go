package ctrlmanager_test

import (
	"fmt"
	"testing"
)

// sideBySide are the faults BenchmarkFailover applies, in turn, to each
// lock's leader.
var sideBySide = []string{"partition", "close", "delete", "stop", "crash"}

// BenchmarkFailover measures failover with real controller-runtime
// managers, side by side: three candidates on this lock set up with
// ctrlmanager.Options, and three on client-go's Lease lock (client-go's
// fake clientset with an API server's optimistic concurrency) set up as
// controller-runtime documents it, both with the same durations (client-go's
// defaults 15 s / 10 s / 2 s and TTL 6 s; short: 1.5 s / 1 s / 300 ms and
// TTL 2 s), two of the three releasing when stopped. Each iteration applies
// every fault once, in turn, to whoever leads; the figures of all
// iterations of a lock (Go runs one, then -benchtime's count) are printed
// when all have run: from the fault to the next leader's first work, to
// the faulty leader's last work, the overlaps, and the faults the leader
// kept its term through.
//
//	go test -run '^$' -bench 'Failover/defaults' -benchtime 5x -timeout 2h ./ctrlmanager
func BenchmarkFailover(b *testing.B) {
	for _, s := range []struct {
		name string
		setup
	}{{"defaults", defaults}, {"short", short}} {
		b.Run(s.name, func(b *testing.B) {
			etcd, lease := failovers{}, failovers{}
			b.Run("kubelock", func(b *testing.B) {
				_, took := runEtcdManagers(b, s.setup, b.N*len(sideBySide)+1, inTurn(sideBySide...))
				etcd.add(took)
			})
			b.Run("lease", func(b *testing.B) {
				_, took := runLeaseManagers(b, s.timings, b.N*len(sideBySide)+1, inTurn(sideBySide...))
				lease.add(took)
			})
			// Printed, not logged: Go keeps only ten lines of a benchmark's log.
			fmt.Printf("%s: TTL %v, %v\nkubelock + ctrlmanager:\n", b.Name(), s.ttl, s.timings)
			for _, l := range etcd.lines() {
				fmt.Println("  " + l)
			}
			fmt.Println("client-go's Lease lock:")
			for _, l := range lease.lines() {
				fmt.Println("  " + l)
			}
			fmt.Print(table(etcd, lease))
		})
	}
}

// table returns the README's rows for the two locks' figures.
func table(etcd, lease failovers) string {
	var out string
	for _, f := range sideBySide {
		out += fmt.Sprintf("| %s | %s | %s |\n", f, cell(etcd.stats(f)), cell(lease.stats(f)))
	}
	return out
}

func cell(s *faultStats) string {
	mean, worst := meanWorst(s.took)
	out := fmt.Sprintf("%v / %v (%d)", mean, worst, len(s.took))
	if len(s.overlaps) > 0 {
		_, w := meanWorst(s.overlaps)
		out += fmt.Sprintf(", %d overlapped (worst %v)", len(s.overlaps), w)
	}
	if s.kept > 0 {
		out += fmt.Sprintf(", %d kept by the leader", s.kept)
	}
	return out
}
