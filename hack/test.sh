#!/usr/bin/env bash
# The README's test command (`make test`): starts a throwaway PostgreSQL for
# the SQL fencing tests unless ETCDLOCK_TEST_POSTGRES_DSN is already set,
# runs every test of every module with the race detector, and stops what
# it started.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ -z ${ETCDLOCK_TEST_POSTGRES_DSN:-} ]]; then
	pgdir=$(mktemp -d /tmp/etcdlock-pg.XXXXXX)
	trap 'hack/pg.sh stop "$pgdir"' EXIT
	echo "starting a throwaway PostgreSQL in $pgdir" >&2
	ETCDLOCK_TEST_POSTGRES_DSN=$(hack/pg.sh start "$pgdir")
	export ETCDLOCK_TEST_POSTGRES_DSN
fi

# The root module and each nested module (pkg/kubelock: the Kubernetes
# resource lock, a module of its own so that the lock's users never build
# Kubernetes code), at the same time: each spends most of its time waiting
# on etcd. A nested module's output is printed once it is done, so that
# the modules' lines do not interleave. Every module runs even if another
# fails.
#
# Most tests wait on etcd (leases expiring, watches, a lock-delay) far more
# than they compute, and each owns its key prefix, so they run in parallel:
# more at once than the default of one per core. The randomized runs of
# the integration package limit themselves (integration/main_test.go).
parallel=${ETCDLOCK_TEST_PARALLEL:-4}
gotest() { go test -race -count=1 -parallel "$parallel" -timeout 20m "$@"; }
rc=0
pids=() logs=()
if [[ $# -eq 0 || "$*" == "./..." ]]; then
	for mod in $(hack/modules.sh nested); do
		log=$(mktemp /tmp/etcdlock-test.XXXXXX)
		(cd "$mod" && gotest ./...) >"$log" 2>&1 &
		pids+=($!) logs+=("$log")
	done
fi
# The alert rules' unit tests, by promtool (Debian's prometheus package,
# installed here when missing and this runs as root, as pg.sh installs
# PostgreSQL).
if ! command -v promtool >/dev/null && [[ $(id -u) -eq 0 ]]; then
	echo "installing prometheus (promtool)" >&2
	apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >&2
fi
all=$(mktemp /tmp/etcdlock-test.XXXXXX)
if ! (cd pkg/lock/lockmetrics/monitoring && promtool test rules alerts_test.yaml); then
	echo "FAIL	pkg/lock/lockmetrics/monitoring/alerts_test.yaml (promtool test rules)" | tee -a "$all"
	rc=1
fi
gotest "${@:-./...}" 2>&1 | tee "$all" || rc=$?
for i in "${!pids[@]}"; do
	wait "${pids[$i]}" || rc=$?
	cat "${logs[$i]}" | tee -a "$all"
	rm -f "${logs[$i]}"
done
# A failing run ends with what failed, which goroutine dumps and logs
# above may have buried.
if [[ $rc -ne 0 ]]; then
	echo
	echo "make test failed:"
	grep -E '^(--- FAIL|FAIL|panic:)' "$all" | grep -v '^FAIL$' | sort -u | sed 's/^/  /'
fi
rm -f "$all"
exit $rc
