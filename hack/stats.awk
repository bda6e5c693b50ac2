# Shared by hack/bench-summary.awk and hack/scale-summary.awk: the values
# of a key are vals[key, 1..count[key]].

# sortvals sorts the values of key into a[1..n] and returns n.
function sortvals(key, a,    n, i, j, v) {
	n = count[key]
	for (i = 1; i <= n; i++) a[i] = vals[key, i]
	for (i = 2; i <= n; i++) {
		v = a[i]
		for (j = i - 1; j >= 1 && a[j] > v; j--) a[j + 1] = a[j]
		a[j + 1] = v
	}
	return n
}

# median is the median of the values of key.
function median(key,    n, a) {
	n = sortvals(key, a)
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
