#!/usr/bin/env bash
# The loss lead time (BenchmarkLossLeadTime: etcd deletes the key − the
# client declares the lock lost, 20 trials, TTL 2 s) measured on a busy
# machine: BUSY (default 2) CPU-bound loops run beside the benchmark,
# started after the build and stopped when it ends, so that the etcd
# members, the client and the watcher all compete for the cores.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=$(mktemp -d /tmp/etcdlock-loss.XXXXXX)
export GOTMPDIR=$dir
busy=()
cleanup() {
	for pid in "${busy[@]}"; do kill "$pid" 2>/dev/null || true; done
	rm -rf "$dir"
}
trap cleanup EXIT

echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(nproc) cores, ${BUSY:-2} busy loops, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
go test -c -o "$dir/lock.test" ./pkg/lock
for _ in $(seq "${BUSY:-2}"); do
	(while :; do :; done) &
	busy+=($!)
done
(cd pkg/lock && "$dir/lock.test" -test.run '^$' -test.bench 'LossLeadTime' -test.benchtime 1x -test.v)
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
