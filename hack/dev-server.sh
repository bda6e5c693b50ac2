# Sourced by the bench scripts: start_dev DIR starts DIR/etcdlock-dev (built
# by the caller) on a free loopback port and sets dev_pid and dev_ep (its
# client URL) once etcd serves; stop_dev stops it. The caller traps EXIT to
# call stop_dev.

start_dev() {
	local dir=$1
	"$dir/etcdlock-dev" --listen 127.0.0.1:0 >"$dir/dev.out" 2>"$dir/dev.err" &
	dev_pid=$!
	for _ in $(seq 600); do
		# etcdlock-dev prints its endpoint once etcd is ready.
		dev_ep=$(head -1 "$dir/dev.out")
		[[ -n $dev_ep ]] && return 0
		if ! kill -0 "$dev_pid" 2>/dev/null; then
			cat "$dir/dev.err" >&2
			return 1
		fi
		sleep 0.1
	done
	echo "etcdlock-dev did not start within 60 s" >&2
	return 1
}

stop_dev() {
	if [[ -n ${dev_pid:-} ]]; then
		kill "$dev_pid" 2>/dev/null && wait "$dev_pid" 2>/dev/null
		dev_pid=""
	fi
	return 0
}
