#!/usr/bin/env bash
# `make bench`: every Go benchmark, each comparing contenders side by side in
# one process (benchstat-friendly output). Starts a throwaway PostgreSQL for
# the SQL fence benchmark unless ETCDLOCK_TEST_POSTGRES_DSN is set.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ -z ${ETCDLOCK_TEST_POSTGRES_DSN:-} ]]; then
	pgdir=$(mktemp -d /tmp/etcdlock-pg.XXXXXX)
	trap 'hack/pg.sh stop "$pgdir" 2>/dev/null' EXIT
	ETCDLOCK_TEST_POSTGRES_DSN=$(hack/pg.sh start "$pgdir" 2>/dev/null)
	export ETCDLOCK_TEST_POSTGRES_DSN
fi

go test -run '^$' -bench "${BENCH:-.}" -benchmem -benchtime "${BENCHTIME:-1s}" -count "${BENCHCOUNT:-5}" ./pkg/lock ./fencing/...
