# Summarizes go test -bench output of several rounds: one row per
# benchmark and metric, the median with the minimum and maximum over the
# rounds, named after their package (B/op and allocs/op left out, and
# ns/op for a benchmark that reports figures of its own).
# Usage: awk -f hack/stats.awk -f hack/bench-summary.awk bench.out

/^pkg: / { pkg = $2; sub(/.*\//, "", pkg) }

/^Benchmark/ {
	name = $1
	sub(/-[0-9]+$/, "", name)
	sub(/^Benchmark/, "", name)
	name = pkg "." name
	own = 0 # figures of its own, beside ns/op, B/op and allocs/op
	for (i = 3; i < NF; i += 2)
		if ($(i + 1) != "ns/op" && $(i + 1) != "B/op" && $(i + 1) != "allocs/op") own++
	for (i = 3; i < NF; i += 2) {
		unit = $(i + 1)
		if (unit == "ns/op" && own || unit == "B/op" || unit == "allocs/op") continue
		key = name " " unit
		if (!(key in count)) order[++keys] = key
		vals[key, ++count[key]] = $i
	}
}

function num(v) {
	return v >= 1e4 || v <= -1e4 ? sprintf("%.0f", v) : sprintf("%.4g", v)
}

END {
	printf "%-72s %12s %25s %3s\n", "benchmark and figure", "median", "min - max", "n"
	for (k = 1; k <= keys; k++) {
		key = order[k]
		n = sortvals(key, a)
		med = median(key)
		printf "%-72s %12s %12s - %-10s %3d\n", key, num(med), num(a[1]), num(a[n]), n
	}
}
