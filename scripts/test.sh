#!/usr/bin/env bash
# Runs the whole test suite on a fresh Debian machine: installs what the
# tests need, starts dockerd (if it is not running) and a throwaway
# PostgreSQL cluster and a throwaway S3-compatible server (versitygw, built
# once and cached: scripts/lib.sh), runs `go test -race ./...` with
# AGENTKERNEL_TEST_POSTGRES_URL and AGENTKERNEL_TEST_S3_* set and TMPDIR
# inside this run's work dir, then checks that the tests left nothing behind
# (processes, containers, temp files), stops what it started and removes its
# work dir.
#
# With CI=true a dependency that does not come up (dockerd, the docker test
# image, PostgreSQL, the S3 server, an interpreter) fails the run at once,
# and the tests fail instead of skipping when one is missing
# (internal/testenv).
#
# Extra arguments go to `go test` (default: ./...).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

in_ci() { [ "${CI:-}" = true ] || [ "${CI:-}" = 1 ]; }

# missing reports a dependency that did not come up: fatal in CI, a warning
# (the tests that need it skip) elsewhere.
missing() {
	if in_ci; then
		log "FAIL (CI=true): $*"
		exit 1
	fi
	log "$* -- the tests that need it will skip (with CI=true this fails the run)"
}

require_go
apt_install bubblewrap docker.io busybox-static iproute2 ca-certificates python3 nodejs python3-pip git curl chromium
# npm ships with NodeSource's nodejs, which conflicts with Debian's npm
# package: install it only where nodejs came without it.
[ -x /usr/bin/npm ] || apt_install npm
if ! command -v initdb >/dev/null && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
	apt_install postgresql
fi
for interp in /usr/bin/python3 /usr/bin/node; do
	[ -x "$interp" ] || missing "$interp is not installed (the object helper tests need it)"
done
# Environment package builds run the sandbox's pip and npm (the host's,
# for the process driver's default image).
/usr/bin/python3 -m pip --version >/dev/null 2>&1 || missing "pip for /usr/bin/python3 is not installed (the environment packages tests need it)"
[ -x /usr/bin/npm ] || missing "/usr/bin/npm is not installed (the environment packages tests need it)"

# A short name: the tests' unix sockets live below it (107-byte limit).
WORK="$(mktemp -d /tmp/aktest.XXXXXX)"
chmod 755 "$WORK"
mkdir -m 755 "$WORK/tmp"
PG_CTL=""
PGDATA=""
DOCKERD_WRAPPER=""

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [ -n "$PG_CTL" ] && [ -n "$PGDATA" ]; then
		log "stopping PostgreSQL"
		run_pg "$PG_CTL" -D "$PGDATA" -m immediate -w stop >/dev/null 2>&1 || true
	fi
	s3_stop "$WORK/s3"
	stop_dockerd
	rm -rf "$WORK" || log "could not remove $WORK"
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
	PGDATA="$WORK/pg/data"
	mkdir -p "$WORK/pg"
	[ "$(id -u)" = 0 ] && chown postgres "$WORK/pg"
	local port
	port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 55439)"
	log "starting throwaway PostgreSQL on 127.0.0.1:$port ($PGDATA)"
	if ! run_pg "$bindir/initdb" -D "$PGDATA" -A trust -U postgres --no-sync >"$WORK/pg/initdb.log" 2>&1; then
		tail -20 "$WORK/pg/initdb.log" >&2
		missing "PostgreSQL: initdb failed"
		return 0
	fi
	PG_CTL="$bindir/pg_ctl"
	if ! run_pg "$PG_CTL" -D "$PGDATA" -w -l "$WORK/pg/log" \
		-o "-p $port -k $WORK/pg -c listen_addresses=127.0.0.1 -c fsync=on -c max_connections=300" start >/dev/null; then
		tail -20 "$WORK/pg/log" >&2 || true
		missing "PostgreSQL did not start"
		return 0
	fi
	export AGENTKERNEL_TEST_POSTGRES_URL="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
}

# start_s3 starts the S3 server of the blob engine s3's tests; it exports
# AGENTKERNEL_TEST_S3_*.
start_s3() {
	mkdir -p "$WORK/s3"
	if ! s3_start "$WORK/s3"; then
		tail -20 "$WORK/s3/log" >&2 2>/dev/null || true
		s3_stop "$WORK/s3"
		missing "the S3 test server (versitygw) did not start"
		return 0
	fi
	log "S3 test server (versitygw) on $AGENTKERNEL_TEST_S3_ENDPOINT ($WORK/s3)"
}

start_dockerd() {
	if docker info >/dev/null 2>&1; then
		log "dockerd already running (not started by this run: it is left running)"
		return 0
	fi
	log "starting dockerd"
	as_root dockerd --host=unix:///var/run/docker.sock --pidfile="$WORK/dockerd.pid" \
		>"$WORK/dockerd.log" 2>&1 &
	# $! is the as_root subshell (or sudo), not dockerd: dockerd's own pid
	# is in its pidfile, and that is the one stop_dockerd signals.
	DOCKERD_WRAPPER=$!
	for _ in $(seq 1 100); do
		docker info >/dev/null 2>&1 && return 0
		kill -0 "$DOCKERD_WRAPPER" 2>/dev/null || break
		sleep 0.3
	done
	log "dockerd did not start. Its log:"
	tail -20 "$WORK/dockerd.log" >&2 || true
	missing "dockerd did not start"
}

# stop_dockerd stops the dockerd this run started (none otherwise) and waits
# until it is gone.
stop_dockerd() {
	[ -n "$DOCKERD_WRAPPER" ] || return 0
	local pid=""
	[ -s "$WORK/dockerd.pid" ] && pid="$(cat "$WORK/dockerd.pid")"
	if [ -n "$pid" ] && as_root kill -0 "$pid" 2>/dev/null; then
		log "stopping dockerd (pid $pid)"
		as_root kill "$pid" 2>/dev/null || true
		for _ in $(seq 1 150); do as_root kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
		if as_root kill -0 "$pid" 2>/dev/null; then
			log "dockerd (pid $pid) ignored SIGTERM for 30s: killing it"
			as_root kill -9 "$pid" 2>/dev/null || true
		fi
	fi
	wait "$DOCKERD_WRAPPER" 2>/dev/null || true
	DOCKERD_WRAPPER=""
}

start_postgres
start_s3
start_dockerd
if docker info >/dev/null 2>&1; then
	log "building the docker test image (cached by tag)"
	bash scripts/docker-image/build.sh || missing "the docker test image did not build"
fi

log "go test -race (TMPDIR=$WORK/tmp)"
set +e
TMPDIR="$WORK/tmp" go test -race -timeout 45m -count=1 "${@:-./...}"
rc=$?
set -e
# Stopped before the leak check, which would otherwise count it (its
# command line names the work dir).
s3_stop "$WORK/s3"

if ! LEAK_WORK="$WORK" bash scripts/leakcheck.sh; then
	[ $rc -ne 0 ] || rc=1
fi
exit $rc
