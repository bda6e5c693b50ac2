#!/usr/bin/env bash
# `make bench`: every benchmark, each comparing contenders side by side in
# one run (benchstat-friendly output for the Go ones). Starts a throwaway
# PostgreSQL for the SQL fence benchmark unless ETCDLOCK_TEST_POSTGRES_DSN is
# set, and an etcdlock-dev server for the memory benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=$(mktemp -d /tmp/etcdlock-bench.XXXXXX)
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

# Per-operation benchmarks, repeated so benchstat can compare them.
go test -run '^$' -bench "${BENCH:-Uncontended|Handoff|Throughput|WithFence}" -benchmem -benchtime "${BENCHTIME:-1s}" -count "${BENCHCOUNT:-5}" ./pkg/lock ./fencing/...
# One-shot measurements: loss lead time (20 trials), then memory per held
# lock against an etcd in another process, so that only the client's heap
# is counted.
go test -run '^$' -bench 'LossLeadTime' -benchtime 1x ./pkg/lock
# Built as bench-cli.sh builds it, so that the second build is a cache hit.
CGO_ENABLED=0 go build -trimpath -o "$dir/" ./cmd/etcdlock-dev
start_dev "$dir"
ETCDLOCK_BENCH_ENDPOINTS=$dev_ep go test -run '^$' -bench 'MemoryPerLock' -benchtime 1x ./pkg/lock
stop_dev
# Election failover, next to client-go's documented defaults (not run here:
# client-go needs a Kubernetes API server).
go test -run '^$' -bench 'Failover' -benchtime "${FAILOVERS:-5}x" ./pkg/election
echo "reference: client-go leaderelection defaults (LeaseDuration 15s, RenewDeadline 10s, RetryPeriod 2s):" \
	"graceful release -> next leader up to 2000 ms (followers poll every RetryPeriod)," \
	"crash -> next leader up to 17000 ms (LeaseDuration + RetryPeriod)"
# The Kubernetes resource lock under client-go's own LeaderElector (a
# nested module), with client-go's Lease-lock bounds printed beside.
(cd pkg/kubelock && go test -run '^$' -bench 'Failover' -benchtime "${FAILOVERS:-5}x" .)
# The CLI against etcdctl.
hack/bench-cli.sh
