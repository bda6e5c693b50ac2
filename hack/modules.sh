#!/usr/bin/env bash
# Lists the repository's Go modules: `all` (default) prints the root and
# every nested module's directory, `nested` only the nested ones. One list,
# used by hack/test.sh and the Makefile's lint.
set -euo pipefail
cd "$(dirname "$0")/.."
nested=$(find . -mindepth 2 -name go.mod -not -path './.git/*' -printf '%h\n' | sed 's|^\./||' | sort)
case ${1:-all} in
all) echo .; echo "$nested" | sed '/^$/d' ;;
nested) echo "$nested" | sed '/^$/d' ;;
*) echo "usage: $0 [all|nested]" >&2; exit 64 ;;
esac
