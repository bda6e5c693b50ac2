#!/usr/bin/env bash
# Wall time and peak RSS of wrapping `true` in a lock: `etcdlock run` versus
# `etcdctl lock` (Debian's etcd-client, installed here when missing), both
# against one etcdlock-dev server, interleaved run by run so machine noise
# hits both alike. CLI_RUNS (default 30) rounds.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${CLI_RUNS:-30}

if ! command -v etcdctl >/dev/null; then
	echo "installing etcd-client (etcdctl)" >&2
	apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-client >&2
fi
dir=$(mktemp -d /tmp/etcdlock-bench-cli.XXXXXX)
source hack/dev-server.sh
cleanup() { stop_dev; rm -rf "$dir"; }
trap cleanup EXIT
# Built as `make build` builds them: static, as etcd's releases are.
CGO_ENABLED=0 go build -trimpath -o "$dir/" ./cmd/etcdlock ./cmd/etcdlock-dev
start_dev "$dir"
ep=$dev_ep

# measure CMD...: prints "wall_ms rss_kb"
measure() {
	local t0 t1 rss
	t0=$(date +%s%N)
	/usr/bin/time -f %M -o "$dir/rss" "$@" >/dev/null 2>&1 || true
	rss=$(tail -1 "$dir/rss")
	t1=$(date +%s%N)
	echo "$(( (t1 - t0) / 1000 )) $rss"
}
: >"$dir/ours"; : >"$dir/theirs"
for _ in $(seq "$runs"); do
	measure "$dir/etcdlock" --endpoints "$ep" run bench -- true >>"$dir/ours"
	measure env ETCDCTL_API=3 etcdctl --endpoints "$ep" lock bench true >>"$dir/theirs"
done

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ow=$(cut -d' ' -f1 "$dir/ours" | median); tw=$(cut -d' ' -f1 "$dir/theirs" | median)
or=$(cut -d' ' -f2 "$dir/ours" | median); tr=$(cut -d' ' -f2 "$dir/theirs" | median)
echo "cli runs=$runs (medians, interleaved)"
awk -v ow="$ow" -v tw="$tw" -v or="$or" -v tr="$tr" 'BEGIN {
	printf "%-32s %10s %12s\n", "", "wall", "peak RSS"
	printf "%-32s %8.1fms %10dKB\n", "etcdlock run bench -- true", ow / 1000, or
	printf "%-32s %8.1fms %10dKB\n", "etcdctl lock bench true", tw / 1000, tr
	printf "%-32s %9.2fx %11.2fx\n", "ratio etcdlock/etcdctl", ow / tw, or / tr
}'
