#!/usr/bin/env bash
# `make bench-scale`: the benchmarks against a 3-member etcd cluster of
# separate processes on loopback (etcdlock-dev --members 3: fsync on,
# etcd's default raft timing), from this separate client process.
# First part of the scale suite: throughput beside concurrency.Mutex and
# raw writes.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=$(mktemp -d /tmp/etcdlock-bench-scale.XXXXXX)
dev_pid=""
cleanup() {
	if [[ -n $dev_pid ]]; then
		kill "$dev_pid" 2>/dev/null && wait "$dev_pid" 2>/dev/null
	fi
	rm -rf "$dir"
}
trap cleanup EXIT

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
tail -n +2 "$dir/dev.out" >&2

echo "throughput (etcdlock, concurrency.Mutex, raw writes), ${SCALE_COUNT:-3} rounds ..." >&2
ETCDLOCK_BENCH_ENDPOINTS=$endpoints go test -run '^$' -bench 'Throughput' \
	-benchtime "${SCALE_BENCHTIME:-3s}" -count "${SCALE_COUNT:-3}" ./pkg/lock
