#!/usr/bin/env bash
# Wall time, CPU time and peak RSS of wrapping `true` in a lock: `etcdlock run` versus
# `etcdctl lock`, all against one etcdlock-dev server, interleaved run by
# run so machine noise hits each alike. CLI_RUNS (default 60) rounds. Two
# etcdctls: Debian's etcd-client (installed here when missing), the one a
# user has at hand, and etcd's own release of the client version etcdlock
# links (built here from its module), which links the same gRPC and
# protobuf code. Debian's (etcd 3.4, Go 1.19) uses gogo-protobuf's
# generated marshalers; etcd v3.7's API is generated for protobuf-go, whose
# first use of each message type builds its tables at run time.
# CLI_BASELINE=<git revision> also times etcdlock as built at that
# revision, in the same rounds, for a before and after.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${CLI_RUNS:-60}
if ! [[ $runs =~ ^[1-9][0-9]*$ ]]; then
	echo "bench-cli: CLI_RUNS must be a positive whole number, not '$runs'" >&2
	exit 64
fi
baseline=""
if [[ -n ${CLI_BASELINE:-} ]]; then
	baseline=$(git rev-parse --short "$CLI_BASELINE^{commit}" 2>/dev/null) || {
		echo "bench-cli: CLI_BASELINE '$CLI_BASELINE' is not a commit of this repository" >&2
		exit 64
	}
fi
# The caller's settings would change what is measured, for one side only.
unset GOMAXPROCS
for v in $(compgen -e | grep -E '^(ETCDLOCK|ETCDCTL)_' || true); do unset "$v"; done

if ! command -v etcdctl >/dev/null; then
	echo "installing etcd-client (etcdctl)" >&2
	apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-client >&2
fi
dir=$(mktemp -d /tmp/etcdlock-bench-cli.XXXXXX)
# go build's work directories too, so that an interrupted build leaves none.
export GOTMPDIR=$dir
source hack/dev-server.sh
# A measured command still running (the script was signalled) is killed
# with the cmdstat that runs it (cmdstat sets a parent-death signal).
cleanup() {
	pkill -KILL -P $$ -x cmdstat 2>/dev/null || true
	stop_dev
	[[ -d $dir/baseline-src ]] && git worktree remove --force "$dir/baseline-src" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# Built as `make build` builds them: static, as etcd's releases are.
CGO_ENABLED=0 go build -trimpath -o "$dir/" ./cmd/etcdlock ./cmd/etcdlock-dev ./cmd/etcdlock-guardian
start_dev "$dir"
ep=$dev_ep

go build -o "$dir/" ./hack/cmdstat
if [[ -n $baseline ]]; then
	echo "building etcdlock at $baseline" >&2
	git worktree add -q --detach "$dir/baseline-src" "$baseline" >&2
	mkdir "$dir/baseline-bin"
	# The guardian's own binary exists since it was split out of etcdlock.
	(cd "$dir/baseline-src" && CGO_ENABLED=0 go build -trimpath -o "$dir/baseline-bin/" ./cmd/etcdlock $([[ -d cmd/etcdlock-guardian ]] && echo ./cmd/etcdlock-guardian)) >&2
fi
release=$(go list -m -f '{{.Version}}' go.etcd.io/etcd/client/v3)
echo "building etcdctl $release" >&2
# Its module has replace directives, so `go install pkg@version` refuses
# it: build it from a throwaway module that requires it.
if ! (mkdir "$dir/etcdctl-src" && cd "$dir/etcdctl-src" && go mod init bench/etcdctl >/dev/null 2>&1 &&
	go get "go.etcd.io/etcd/etcdctl/v3@$release" >/dev/null 2>&1 &&
	CGO_ENABLED=0 go build -trimpath -o "$dir/etcdctl" go.etcd.io/etcd/etcdctl/v3) >&2; then
	echo "bench-cli: cannot build etcdctl $release; comparing with Debian's only" >&2
fi
# Each line of ours/theirs/release: wall_us cpu_us maxrss_kb exit_code.
: >"$dir/ours"; : >"$dir/theirs"; : >"$dir/release"; : >"$dir/baseline"
export ETCDCTL_API=3 # set here: an `env` before etcdctl would add its own exec to etcdctl's figures
for _ in $(seq "$runs"); do
	"$dir/cmdstat" "$dir/etcdlock" --endpoints "$ep" run bench -- true >>"$dir/ours"
	"$dir/cmdstat" etcdctl --endpoints "$ep" lock bench true >>"$dir/theirs"
	if [ -x "$dir/etcdctl" ]; then
		"$dir/cmdstat" "$dir/etcdctl" --endpoints "$ep" lock bench true >>"$dir/release"
	fi
	if [[ -n $baseline ]]; then
		"$dir/cmdstat" "$dir/baseline-bin/etcdlock" --endpoints "$ep" run bench -- true >>"$dir/baseline"
	fi
done
[ -s "$dir/release" ] || rm "$dir/release"
[ -s "$dir/baseline" ] || rm "$dir/baseline"
for f in ours theirs release baseline; do
	[ -e "$dir/$f" ] || continue
	if awk '$4 != 0 { bad = 1 } END { exit !bad }' "$dir/$f"; then
		echo "bench-cli: a run of $f exited non-zero:" >&2; cat "$dir/$f" >&2; exit 1
	fi
done

# stat FILE COLUMN: "median min max" of that column (hack/stats.awk's
# median and sort).
stat() {
	cut -d' ' -f"$2" "$1" | awk -f hack/stats.awk -f <(echo '{ vals["v", ++count["v"]] = $1 } END { n = sortvals("v", a); print median("v"), a[1], a[n] }')
}
debian=$(etcdctl version | awk '/etcdctl version/ {print $3}')
echo "cli runs=$runs, interleaved; commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown); median (min - max)"
{
	echo "etcdlock run bench -- true" $(stat "$dir/ours" 1) $(stat "$dir/ours" 2) $(stat "$dir/ours" 3)
	echo "etcdctl lock (Debian $debian)" $(stat "$dir/theirs" 1) $(stat "$dir/theirs" 2) $(stat "$dir/theirs" 3)
	if [ -e "$dir/release" ]; then
		echo "etcdctl lock (etcd $release)" $(stat "$dir/release" 1) $(stat "$dir/release" 2) $(stat "$dir/release" 3)
	fi
	if [ -e "$dir/baseline" ]; then
		echo "etcdlock run at $baseline" $(stat "$dir/baseline" 1) $(stat "$dir/baseline" 2) $(stat "$dir/baseline" 3)
	fi
} | awk '
function row(label, w, wl, wh, c, cl, ch, r, rl, rh) {
	printf "%-34s %6.1f ms (%5.1f - %5.1f) %6.1f ms (%5.1f - %5.1f) %6.1f MB (%4.1f - %4.1f)\n", label, w/1000, wl/1000, wh/1000, c/1000, cl/1000, ch/1000, r/1024, rl/1024, rh/1024
}
BEGIN { printf "%-34s %-25s %-25s %s\n", "", "wall", "CPU (user + system)", "peak RSS" }
{
	n = split($0, f, " "); label = f[1]; for (i = 2; i <= n - 9; i++) label = label " " f[i]
	k = n - 9
	row(label, f[k+1], f[k+2], f[k+3], f[k+4], f[k+5], f[k+6], f[k+7], f[k+8], f[k+9])
	names[NR] = label; w[NR] = f[k+1]; c[NR] = f[k+4]; r[NR] = f[k+7]
}
END {
	for (i = 2; i <= NR; i++) {
		v = names[i]; sub(/^etcdctl lock /, "etcdctl ", v)
		printf "%-34s %6.2fx %18s %6.2fx %18s %6.2fx\n", "ratio to " v, w[1]/w[i], "", c[1]/c[i], "", r[1]/r[i]
	}
}'
# The rounds are interleaved, so each of ours has a neighbour of each other
# run that met the same machine: the median of those paired ratios is
# steadier than the ratio of the medians when the machine's speed drifts.
paired() { # paired FILE COLUMN: the median of ours / FILE, round by round
	paste -d' ' <(cut -d' ' -f"$2" "$dir/ours") <(cut -d' ' -f"$2" "$1") |
		awk -f hack/stats.awk -f <(echo '{ vals["v", ++count["v"]] = $1 / $2 } END { printf "%.2f", median("v") }')
}
echo "paired, round by round (median of $runs ratios):"
for f in theirs release baseline; do
	[ -e "$dir/$f" ] || continue
	case $f in
	theirs) label="etcdctl (Debian $debian)" ;;
	release) label="etcdctl (etcd $release)" ;;
	baseline) label="etcdlock run at $baseline" ;;
	esac
	printf "%-34s %6sx %18s %6sx %18s %6sx\n" "ratio to $label" "$(paired "$dir/$f" 1)" "" "$(paired "$dir/$f" 2)" "" "$(paired "$dir/$f" 3)"
done
