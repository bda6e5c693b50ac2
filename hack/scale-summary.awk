# Summarizes go test -bench output of the scale suite: one row per figure,
# etcdlock beside its peer (impl=mutex: concurrency.Mutex; impl=raw: raw
# Txn writes) with the ratio of medians; the median and min-max where a benchmark ran
# more than once.
# Usage: awk -f hack/stats.awk -f hack/scale-summary.awk bench.out

function show(key,    i, lo, hi) {
	if (!(key in count)) return "-"
	if (count[key] == 1) return sprintf("%.4g", median(key))
	lo = hi = vals[key, 1]
	for (i = 2; i <= count[key]; i++) {
		if (vals[key, i] < lo) lo = vals[key, i]
		if (vals[key, i] > hi) hi = vals[key, i]
	}
	return sprintf("%.4g (%.4g-%.4g)", median(key), lo, hi)
}

function ratio(a, b) {
	if (!(a in count) || !(b in count) || median(b) == 0) return "-"
	return sprintf("%.2fx", median(a) / median(b))
}

/^Benchmark/ {
	name = $1
	sub(/-[0-9]+$/, "", name)
	sub(/^Benchmark/, "", name)
	impl = "etcdlock"
	if (match(name, /\/impl=[a-z]+/)) {
		impl = substr(name, RSTART + 6, RLENGTH - 6)
		name = substr(name, 1, RSTART - 1) substr(name, RSTART + RLENGTH)
	}
	for (i = 3; i < NF; i += 2) {
		unit = $(i + 1)
		if (unit == "ns/op") continue
		fig = name " " unit
		if (!(fig in seen)) {
			seen[fig] = 1
			order[++figs] = fig
		}
		key = fig SUBSEP impl
		vals[key, ++count[key]] = $i
	}
}

END {
	printf "%-58s %24s %24s %8s %24s %8s\n", "figure (median (min-max) of runs)", "etcdlock", "Mutex", "vs Mutex", "raw writes", "vs raw"
	for (f = 1; f <= figs; f++) {
		fig = order[f]
		e = fig SUBSEP "etcdlock"
		m = fig SUBSEP "mutex"
		r = fig SUBSEP "raw"
		printf "%-58s %24s %24s %8s %24s %8s\n", fig, show(e), show(m), ratio(e, m), show(r), ratio(e, r)
	}
}
