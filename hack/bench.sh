#!/usr/bin/env bash
# `make bench`: every benchmark, each comparing contenders side by side in
# one run (benchstat-friendly output for the Go ones). Starts a throwaway
# PostgreSQL for the SQL fence benchmark unless ETCDLOCK_TEST_POSTGRES_DSN is
# set, and an etcdlock-dev server for the memory benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=$(mktemp -d /tmp/etcdlock-bench.XXXXXX)
# go build's work directories too, so that an interrupted build leaves none.
export GOTMPDIR=$dir
pgdir=""
source hack/dev-server.sh
cleanup() {
	stop_dev
	[[ -n $pgdir ]] && hack/pg.sh stop "$pgdir" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT

if [[ -z ${ETCDLOCK_TEST_POSTGRES_DSN:-} ]]; then
	pgdir=$(mktemp -d /tmp/etcdlock-pg.XXXXXX)
	ETCDLOCK_TEST_POSTGRES_DSN=$(hack/pg.sh start "$pgdir" 2>/dev/null)
	export ETCDLOCK_TEST_POSTGRES_DSN
fi

echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with local changes)'), $(go version | cut -d' ' -f3), $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'))"
go test -c -o "$dir/lock.test" ./pkg/lock
go test -c -o "$dir/sqlfence.test" ./fencing/sqlfence
# Per-operation benchmarks, BENCHCOUNT rounds. Each round runs every
# contender once (within a benchmark the contenders take turns cycle by
# cycle, or run one after another), so that a noisy minute falls on all of
# them alike; -count would run one contender's rounds back to back. The
# output stays benchstat-ready.
for round in $(seq "${BENCHCOUNT:-5}"); do
	echo "== round $round of ${BENCHCOUNT:-5} ($(date +%T))" >&2
	(cd pkg/lock && "$dir/lock.test" -test.run '^$' -test.bench "${BENCH:-Uncontended|Handoff|Throughput}" -test.benchmem -test.benchtime "${BENCHTIME:-1s}") | tee -a "$dir/bench.out"
	(cd fencing/sqlfence && "$dir/sqlfence.test" -test.run '^$' -test.bench "${BENCH:-WithFence}" -test.benchmem -test.benchtime "${BENCHTIME:-1s}") | tee -a "$dir/bench.out"
done
# One-shot measurements: loss lead time (20 trials), then memory per held
# lock against an etcd in another process, so that only the client's heap
# is counted.
(cd pkg/lock && "$dir/lock.test" -test.run '^$' -test.bench 'LossLeadTime' -test.benchtime 1x) | tee -a "$dir/bench.out"
# Built as bench-cli.sh builds it, so that the second build is a cache hit.
CGO_ENABLED=0 go build -trimpath -o "$dir/" ./cmd/etcdlock-dev
start_dev "$dir"
(cd pkg/lock && ETCDLOCK_BENCH_ENDPOINTS=$dev_ep "$dir/lock.test" -test.run '^$' -test.bench 'MemoryPerLock' -test.benchtime 1x) | tee -a "$dir/bench.out"
stop_dev
# Election failover, next to client-go's documented defaults (not run here:
# client-go needs a Kubernetes API server).
go test -run '^$' -bench 'Failover' -benchtime "${FAILOVERS:-5}x" ./pkg/election | tee -a "$dir/bench.out"
echo "reference: client-go leaderelection defaults (LeaseDuration 15s, RenewDeadline 10s, RetryPeriod 2s):" \
	"graceful release -> next leader up to 4400 ms (followers retry every RetryPeriod to 2.2 x RetryPeriod, JitterFactor 1.2)," \
	"crash -> next leader up to 19400 ms (LeaseDuration + 2.2 x RetryPeriod)"
# The Kubernetes resource lock under client-go's own LeaderElector (a
# nested module), with client-go's Lease-lock bounds printed beside.
(cd pkg/kubelock && go test -run '^$' -bench 'Failover' -benchtime "${FAILOVERS:-5}x" .) | tee -a "$dir/bench.out"
# The CLI against etcdctl.
hack/bench-cli.sh | tee "$dir/cli.out"
echo
echo "== summary"
awk -f hack/stats.awk -f hack/bench-summary.awk "$dir/bench.out"
cat "$dir/cli.out"
