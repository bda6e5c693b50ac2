#!/usr/bin/env bash
# A newcomer's first hour, on a fresh clone (`make first-hour`): clones this
# repository's HEAD into a temporary directory and follows README.md as
# written — the install steps, `make demo`, the library quick start (a tiny
# module of one's own, pointed at the clone with a go.work, and again with
# a replace), the CLI quick start — printing each step and its time, and
# stops loudly at the first step that does not work as written.
#
#   hack/first-hour.sh            # clone of HEAD (committed work only)
#   FIRST_HOUR_KEEP=1 hack/first-hour.sh   # keep the temporary directory
#
# The install and CLI quick start blocks are read from README.md, so a
# README that changes is followed as changed. Binaries go to a temporary
# GOBIN; the dev server listens on a free port in place of 2379 (the
# machine may run other etcds). Needs git, Go, bash, python3 and network
# access or a warm module cache.
# Each background process (the dev servers) runs in a process group of its
# own, stopped with its group when the script exits.
set -euo pipefail

src=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
commit=$(git -C "$src" rev-parse HEAD)
tmp=$(mktemp -d /tmp/etcdlock-first-hour.XXXXXX)
bg=() # background processes the steps started
cleanup() {
	for p in "${bg[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; done
	for p in "${bg[@]}"; do
		for _ in $(seq 200); do kill -0 -- "-$p" 2>/dev/null || break; sleep 0.1; done
		kill -KILL -- "-$p" 2>/dev/null || true # still there 20 s after SIGTERM
	done
	if [[ -n ${FIRST_HOUR_KEEP:-} ]]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

# since T: seconds since the $EPOCHREALTIME T.
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }
start=$EPOCHREALTIME
n=0
# step NAME CMD...: runs CMD, prints the step's time, stops on failure.
step() {
	local name=$1 t0 rc=0
	shift
	n=$((n + 1))
	t0=$EPOCHREALTIME
	printf '\n== %d. %s\n' "$n" "$name"
	"$@" || rc=$?
	if ((rc != 0)); then
		printf '\n!! FAILED: step %d (%s) exited %d after %s s: the README does not work as written here\n' "$n" "$name" "$rc" "$(since "$t0")" >&2
		exit 1
	fi
	printf '== %d. %s: ok, %s s\n' "$n" "$name" "$(since "$t0")"
}

# block HEADING [N]: the N-th (from 0) ```sh block after the line HEADING
# in the clone's README.md.
block() {
	python3 - "$tmp/etcdlock/README.md" "$1" "${2:-0}" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
_, sep, rest = text.partition("\n" + sys.argv[2] + "\n")
if not sep:
    sys.exit("README.md has no heading " + repr(sys.argv[2]))
blocks = re.findall(r"\n```sh\n(.*?)\n```\n", rest, re.S)
n = int(sys.argv[3])
if len(blocks) <= n:
    sys.exit("README.md: no shell block %d after %r" % (n, sys.argv[2]))
print(blocks[n])
EOF
}

# freeaddr prints a free loopback address.
freeaddr() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print("127.0.0.1:%d" % s.getsockname()[1])'; }

clone() {
	git clone -q "$src" "$tmp/etcdlock" || return
	git -C "$tmp/etcdlock" checkout -q "$commit"
	git -C "$tmp/etcdlock" log --oneline -1
}

install() {
	local script
	script=$(block "## Install" 0)
	printf '%s\n' "$script" | sed 's/^/   $ /'
	(cd "$tmp" && GOBIN="$tmp/gobin" bash -euo pipefail -c "$script") || return
	for c in etcdlock etcdlock-dev etcdlock-guardian; do
		[[ -x $tmp/etcdlock/bin/$c ]] || { echo "make build made no bin/$c" >&2; return 1; }
		[[ -x $tmp/gobin/$c ]] || { echo "go install ./cmd/... installed no $c" >&2; return 1; }
	done
	"$tmp/gobin/etcdlock" version
}

demo() {
	local out
	out=$(cd "$tmp/etcdlock" && make demo 2>&1) || { printf '%s\n' "$out"; return 1; }
	printf '%s\n' "$out"
	grep -q "REJECTED worker-a's write" <<<"$out" || { echo "the demo did not show the stale write rejected" >&2; return 1; }
}

devserver() {
	addr=$(freeaddr)
	setsid "$tmp/etcdlock/bin/etcdlock" dev --listen "$addr" >"$tmp/dev.log" 2>&1 &
	bg+=($!)
	until "$tmp/etcdlock/bin/etcdlock" --endpoints "$addr" status probe >/dev/null 2>&1; do
		kill -0 "${bg[-1]}" 2>/dev/null || { cat "$tmp/dev.log"; return 1; }
		sleep 0.2
	done
	echo "etcdlock dev serves on $addr"
}

# app DIR: a module of one's own whose main does what the library quick
# start shows, against the dev server.
app() {
	mkdir -p "$1" && cd "$1" && go mod init example.com/app 2>/dev/null || return
	cat >main.go <<'EOF'
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/fencing/etcdfence"
	"github.com/etcdlock/etcdlock/pkg/lock"
)

func main() {
	ctx := context.Background()
	logger := zap.NewNop()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{os.Getenv("ENDPOINT")}})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	session, err := lock.NewSession(ctx, cli, lock.WithTTL(10*time.Second), lock.WithLogger(logger))
	if err != nil {
		log.Fatal(err)
	}
	defer session.Close(context.Background())

	l, err := session.Acquire(ctx, "nightly-report")
	if err != nil {
		log.Fatal(err)
	}
	_, err = etcdfence.Commit(l.Context(), cli, l.Key(), l.Token(),
		clientv3.OpPut("/reports/latest", "report"))
	if errors.Is(err, fencing.ErrStaleToken) || err != nil {
		log.Fatal(err)
	}
	fmt.Printf("held nightly-report with token %v and wrote /reports/latest\n", l.Token())
	if err := l.Release(context.Background()); err != nil {
		log.Fatal(err)
	}
}
EOF
}

# library NAME N: the library quick start in a module of one's own beside
# the clone, pointed at it by line N of the README's second Install block,
# as written. (Steps run with errexit off: each failure returns.)
library() (
	app "$tmp/app-$1"
	local line
	line=$(block "## Install" 1 | sed -n "$2p" | sed 's/ *#.*//')
	echo "   \$ $line"
	bash -euo pipefail -c "$line" || return
	ENDPOINT=$addr go run . || return
	pinned
)

# pinned checks that the module in the current directory builds with the
# versions the clone's go.mod requires, for every module the two share.
pinned() {
	local want got off
	want=$(cd "$tmp/etcdlock" && go mod edit -json | python3 -c '
import json, sys
for r in json.load(sys.stdin)["Require"]:
    print(r["Path"], r["Version"])' | LC_ALL=C sort) || return
	got=$(go list -m -f '{{if not .Main}}{{.Path}} {{.Version}}{{end}}' all | LC_ALL=C sort) || return
	off=$(LC_ALL=C join <(printf '%s\n' "$want") <(printf '%s\n' "$got") | awk '$2 != $3 { print "   " $1 ": " $3 ", the clone pins " $2 }')
	if [[ -n $off ]]; then
		printf 'versions other than the clone'"'"'s:\n%s\n' "$off" >&2
		return 1
	fi
	echo "   every module shared with the clone at its pinned version (etcd client $(go list -m -f '{{.Version}}' go.etcd.io/etcd/client/v3))"
}
cli_quickstart() {
	local script
	script=$(block "## Quick start: the CLI wrapping a command" 0)
	printf '%s\n' "$script" | sed 's/^/   $ /'
	local port
	port=$(freeaddr)
	script=${script//127.0.0.1:2379/$port}
	# Its own process group, stopped at the end with what it left running.
	(cd "$tmp/etcdlock" && ETCDLOCK_ENDPOINTS=$port exec setsid bash -c "$script" >"$tmp/cli.log" 2>&1) &
	local pid=$!
	bg+=($pid)
	wait "$pid" || { cat "$tmp/cli.log"; return 1; }
	cat "$tmp/cli.log"
	local want
	want=$(grep -o '# exit [0-9]*' <<<"$script" | head -1 | sed 's/# //')
	grep -qx "$want" "$tmp/cli.log" || { echo "the --try did not print \"$want\" as the README says" >&2; return 1; }
}

step "clone $src at HEAD" clone
step "install, as README.md's Install section says" install
step "make demo" demo
step "a local etcd for the quick starts (etcdlock dev)" devserver
step "library quick start, a module of one's own with a go.work" library work 1
step "library quick start, a module of one's own with a replace" library replace 2
step "CLI quick start, pasted into a shell" cli_quickstart
printf '\nfirst hour: every step worked as written, %s s in all\n' "$(since "$start")"
