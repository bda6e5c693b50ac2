#!/usr/bin/env bash
# One sick member of three, before and after, side by side in one run:
# BenchmarkSickMember (pkg/lock/bench_sick_test.go) built from BASE
# (default main, with this tree's copy of the benchmark) and from this
# tree, run one after the other for each case, SICK_TRIALS trials each
# (default 10). Prints p50/p99 of NewSession, an uncontended Acquire and
# a handoff per case and build.
set -euo pipefail
cd "$(dirname "$0")/.."

base=${BASE:-main}
dir=$(mktemp -d /tmp/etcdlock-sick.XXXXXX)
export GOTMPDIR=$dir
trap 'rm -rf "$dir"' EXIT

mkdir "$dir/base"
git archive "$base" | tar -x -C "$dir/base"
cp pkg/lock/bench_sick_test.go "$dir/base/pkg/lock/"
(cd "$dir/base" && go test -c -o "$dir/before.test" ./pkg/lock)
go test -c -o "$dir/after.test" ./pkg/lock
echo "before: $base ($(git rev-parse --short "$base")), after: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- pkg || echo ' with local changes'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), ${SICK_TRIALS:-10} trials"
for c in ${SICK_CASES:-healthy frozen cut-off}; do
	for build in before after; do
		echo "== $c, $build ($(date +%T))"
		(cd pkg/lock && SICK_CASES=$c "$dir/$build.test" -test.run '^$' -test.bench "SickMember/$c\$" -test.benchtime 1x -test.v) |
			grep -E 'Benchmark|new-session:|acquire:|handoff:'
	done
done
