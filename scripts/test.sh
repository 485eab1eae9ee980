#!/usr/bin/env bash
# Runs the whole test suite on a fresh Debian machine: installs what the
# tests need, starts dockerd (if it is not running) and a throwaway
# PostgreSQL cluster in a temp dir, runs `go test -race ./...` with
# AGENTKERNEL_TEST_POSTGRES_URL set, and stops what it started at exit.
# Extra arguments go to `go test` (default: ./...).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

require_go
apt_install bubblewrap docker.io busybox-static iproute2 ca-certificates
if ! command -v initdb >/dev/null && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
	apt_install postgresql
fi

WORK="$(mktemp -d /tmp/agentkernel-test.XXXXXX)"
chmod 755 "$WORK"
PG_CTL=""
PGDATA=""
DOCKERD_PID=""

cleanup() {
	local rc=$?
	if [ -n "$PG_CTL" ] && [ -n "$PGDATA" ]; then
		log "stopping PostgreSQL"
		run_pg "$PG_CTL" -D "$PGDATA" -m immediate stop >/dev/null 2>&1 || true
	fi
	if [ -n "$DOCKERD_PID" ]; then
		log "stopping dockerd"
		as_root kill "$DOCKERD_PID" 2>/dev/null || true
		for _ in $(seq 1 50); do as_root kill -0 "$DOCKERD_PID" 2>/dev/null || break; sleep 0.2; done
	fi
	rm -rf "$WORK"
	exit $rc
}
trap cleanup EXIT INT TERM

# run_pg runs a PostgreSQL binary as the postgres user when we are root
# (the server refuses to run as root).
run_pg() {
	if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

start_postgres() {
	local bindir
	if command -v initdb >/dev/null; then bindir="$(dirname "$(readlink -f "$(command -v initdb)")")"
	else bindir="$(dirname "$(ls /usr/lib/postgresql/*/bin/initdb | sort -V | tail -1)")"; fi
	PG_CTL="$bindir/pg_ctl"
	PGDATA="$WORK/pg/data"
	mkdir -p "$WORK/pg"
	[ "$(id -u)" = 0 ] && chown postgres "$WORK/pg"
	local port
	port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 55439)"
	log "starting throwaway PostgreSQL on 127.0.0.1:$port ($PGDATA)"
	run_pg "$bindir/initdb" -D "$PGDATA" -A trust -U postgres --no-sync >/dev/null
	run_pg "$PG_CTL" -D "$PGDATA" -w -l "$WORK/pg/log" \
		-o "-p $port -k $WORK/pg -c listen_addresses=127.0.0.1 -c fsync=on -c max_connections=300" start >/dev/null
	export AGENTKERNEL_TEST_POSTGRES_URL="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
}

start_dockerd() {
	if docker info >/dev/null 2>&1; then
		log "dockerd already running"
		return 0
	fi
	log "starting dockerd"
	as_root dockerd --host=unix:///var/run/docker.sock --pidfile="$WORK/dockerd.pid" \
		>"$WORK/dockerd.log" 2>&1 &
	DOCKERD_PID=$!
	for _ in $(seq 1 100); do
		docker info >/dev/null 2>&1 && return 0
		kill -0 "$DOCKERD_PID" 2>/dev/null || break
		sleep 0.3
	done
	log "dockerd did not start; docker-driver tests will skip. Its log:"
	tail -20 "$WORK/dockerd.log" >&2 || true
	DOCKERD_PID=""
}

start_postgres
start_dockerd
if docker info >/dev/null 2>&1; then
	log "building the docker test image (cached by tag)"
	bash scripts/docker-image/build.sh || log "docker image build failed; docker-driver tests will skip"
fi

log "go test -race"
set +e
go test -race -timeout 45m -count=1 "${@:-./...}"
rc=$?
set -e
exit $rc
