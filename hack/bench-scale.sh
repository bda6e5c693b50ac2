#!/usr/bin/env bash
# `make bench-scale`: the scale suite against a 3-member etcd cluster of
# separate processes on loopback (etcdlock-dev --members 3: fsync on,
# etcd's default raft timing), from this separate client process:
# throughput, holders, a hot name, churn, revision growth (in-process, with
# and without auto-compaction) and, last because it kills a member, a
# leader kill under churn. Every figure is printed with its peer beside it
# at the end (hack/scale-summary.awk). About 10 minutes here.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=$(mktemp -d /tmp/etcdlock-bench-scale.XXXXXX)
# go build's work directories too, so that an interrupted build leaves none.
export GOTMPDIR=$dir
dev_pid=""
cleanup() {
	if [[ -n $dev_pid ]]; then
		kill "$dev_pid" 2>/dev/null && wait "$dev_pid" 2>/dev/null
	fi
	rm -rf "$dir"
}
trap cleanup EXIT

echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with local changes)'), $(go version | cut -d' ' -f3), $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'))"
CGO_ENABLED=0 go build -trimpath -o "$dir/" ./cmd/etcdlock-dev
echo "starting a 3-member etcd cluster (separate processes) ..." >&2
"$dir/etcdlock-dev" --members 3 >"$dir/dev.out" 2>"$dir/dev.err" &
dev_pid=$!
endpoints=""
for _ in $(seq 1200); do
	# The first line lists the members' client URLs once all serve.
	endpoints=$(head -1 "$dir/dev.out")
	[[ -n $endpoints ]] && break
	if ! kill -0 "$dev_pid" 2>/dev/null; then
		cat "$dir/dev.err" >&2
		exit 1
	fi
	sleep 0.1
done
[[ -n $endpoints ]] || { echo "the cluster did not start within 120 s" >&2; exit 1; }
echo "cluster: $endpoints" >&2
tail -n +2 "$dir/dev.out" | tee "$dir/members" >&2
export ETCDLOCK_BENCH_ENDPOINTS=$endpoints ETCDLOCK_BENCH_MEMBERS=$dir/members
go test -c -o "$dir/lock.test" ./pkg/lock

bench() { # title, then go test flags
	echo "== $1 ($(date +%T)) ..." >&2
	shift
	"$dir/lock.test" -test.run '^$' "$@" | tee -a "$dir/bench.out"
}
# Rounds take turns (etcdlock, Mutex, raw, etcdlock, ...) rather than
# -test.count, which would run each contender's rounds back to back: on a
# shared machine a slow minute would then fall on one contender.
for round in $(seq "${SCALE_COUNT:-3}"); do
	bench "throughput (etcdlock, concurrency.Mutex, raw writes), round $round of ${SCALE_COUNT:-3}" \
		-test.bench 'Throughput' -test.benchtime "${SCALE_BENCHTIME:-3s}"
done
bench "holders: 100 and 1,000 sessions x 10 locks" -test.bench 'ScaleHolders' -test.benchtime 1x
bench "one hot name, 1,000 waiters" -test.bench 'ScaleHotName' -test.benchtime 1x
bench "churn: 200 sessions over 1,000 names" -test.bench 'ScaleChurn' -test.benchtime 1x
bench "revision growth (fresh in-process member), with and without auto-compaction" \
	-test.bench 'ScaleRevisions' -test.benchtime 1x
bench "leader kill under churn (kills a member: last)" -test.bench 'ScaleLeaderKill' -test.benchtime 1x

echo
awk -f hack/stats.awk -f hack/scale-summary.awk "$dir/bench.out"
