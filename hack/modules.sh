#!/usr/bin/env bash
# Lists the repository's Go modules: `all` (default) prints the root and
# every nested module's directory, `nested` only the nested ones, `tools`
# the modules that hold no package of their own, only a program built from
# their requirements (hack/etcdserver/*: the etcd servers of make compat),
# which make lint keeps tidy but nothing builds, vets or tests. One list,
# used by hack/test.sh, the Makefile's lint and cross, and .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
modules=$(find . -mindepth 2 -name go.mod -not -path './.git/*' -printf '%h\n' | sed 's|^\./||' | sort)
tools=$(echo "$modules" | grep '^hack/etcdserver/' || true)
nested=$(echo "$modules" | grep -v '^hack/etcdserver/' || true)
case ${1:-all} in
all) echo .; echo "$nested" | sed '/^$/d' ;;
nested) echo "$nested" | sed '/^$/d' ;;
tools) echo "$tools" | sed '/^$/d' ;;
*) echo "usage: $0 [all|nested|tools]" >&2; exit 64 ;;
esac
