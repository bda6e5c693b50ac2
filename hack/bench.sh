#!/usr/bin/env bash
# `make bench`: every benchmark, each comparing contenders side by side in
# one run (benchstat-friendly output for the Go ones). Starts a throwaway PostgreSQL for
# the SQL fence benchmark unless ETCDLOCK_TEST_POSTGRES_DSN is set.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ -z ${ETCDLOCK_TEST_POSTGRES_DSN:-} ]]; then
	pgdir=$(mktemp -d /tmp/etcdlock-pg.XXXXXX)
	trap 'hack/pg.sh stop "$pgdir" 2>/dev/null' EXIT
	ETCDLOCK_TEST_POSTGRES_DSN=$(hack/pg.sh start "$pgdir" 2>/dev/null)
	export ETCDLOCK_TEST_POSTGRES_DSN
fi

# Per-operation benchmarks, repeated so benchstat can compare them.
go test -run '^$' -bench "${BENCH:-Uncontended|Handoff|Throughput|WithFence}" -benchmem -benchtime "${BENCHTIME:-1s}" -count "${BENCHCOUNT:-5}" ./pkg/lock ./fencing/...
# One-shot measurements: loss lead time (20 trials) and memory per held lock.
go test -run '^$' -bench 'LossLeadTime|MemoryPerLock' -benchtime 1x ./pkg/lock
# The CLI against etcdctl.
hack/bench-cli.sh
