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

# The root module, then each nested module (pkg/kubelock: the Kubernetes
# resource lock, a module of its own so that the lock's users never build
# Kubernetes code). Both run even if the first fails.
rc=0
go test -race -count=1 -timeout 20m "${@:-./...}" || rc=$?
if [[ $# -eq 0 || "$*" == "./..." ]]; then
	for mod in $(hack/modules.sh nested); do
		(cd "$mod" && go test -race -count=1 -timeout 20m ./...) || rc=$?
	done
fi
exit $rc
