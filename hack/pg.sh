#!/usr/bin/env bash
# Start or stop a throwaway PostgreSQL 15 server for tests, as the
# `postgres` user, in a temporary directory, on a free loopback port.
#
#   hack/pg.sh start DIR   # initdb + start; prints the DSN on stdout
#   hack/pg.sh stop DIR    # stop the server and remove DIR
#
# Installs Debian's postgresql-15 package when the server binaries are
# missing and this runs as root.
set -euo pipefail

PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
cmd=${1:-}; dir=${2:-}
[[ -n $cmd && -n $dir ]] || { echo "usage: $0 start|stop DIR" >&2; exit 64; }

log() { echo "pg.sh: $*" >&2; }

# as_pg runs a command as the postgres user (PostgreSQL refuses to run as
# root), from / : the caller's directory, a checkout under /root say, may be
# one the postgres user cannot enter ("could not change directory ...:
# Permission denied").
as_pg() {
	if [[ $(id -u) -eq 0 ]]; then
		(cd / && runuser -u postgres -- "$@")
	else
		"$@"
	fi
}

ensure_installed() {
	[[ -x $PGBIN/postgres ]] && return
	[[ $(id -u) -eq 0 ]] || { log "$PGBIN/postgres is missing; install postgresql-15"; exit 69; }
	log "installing postgresql-15"
	apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql-15 >&2
	# The package's own cluster is not ours; keep it from running.
	if command -v pg_ctlcluster >/dev/null; then pg_ctlcluster 15 main stop >/dev/null 2>&1 || true; fi
}

free_port() {
	local p
	for _ in $(seq 100); do
		p=$((20000 + RANDOM % 20000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
	done
	log "no free port found"; exit 69
}

start() {
	ensure_installed
	if [[ $(id -u) -eq 0 ]] && ! id postgres >/dev/null 2>&1; then
		useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
	fi
	mkdir -p "$dir"
	[[ $(id -u) -eq 0 ]] && chown postgres: "$dir"
	chmod 700 "$dir"
	as_pg "$PGBIN/initdb" -D "$dir/data" -A trust -U postgres --no-sync >"$dir/initdb.log" 2>&1 \
		|| { cat "$dir/initdb.log" >&2; exit 69; }
	local port
	for _ in 1 2 3; do
		port=$(free_port)
		if as_pg "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
			-o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c max_connections=100" start >&2; then
			echo "postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
			return
		fi
		log "start on port $port failed; retrying"
	done
	cat "$dir/server.log" >&2
	exit 69
}

stop() {
	if [[ -d $dir/data ]]; then
		as_pg "$PGBIN/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null || true
	fi
	rm -rf "$dir"
}

case $cmd in
start) start ;;
stop) stop ;;
*) echo "usage: $0 start|stop DIR" >&2; exit 64 ;;
esac
