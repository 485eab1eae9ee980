#!/usr/bin/env bash
# Runs the S3-compatible server the blob engine s3's tests use, for a
# developer (scripts/test.sh starts its own):
#
#	eval "$(scripts/s3dev.sh start)"   # start it (once) and set AGENTKERNEL_TEST_S3_*
#	go test ./internal/blob/s3blob/
#	scripts/s3dev.sh stop              # stop it and remove its objects
#
# `scripts/s3dev.sh env` prints the exports of the running server again.
# The first start builds the server (versitygw, about 2 minutes); its state
# lives in $AGENTKERNEL_S3DEV_DIR (default /tmp/agentkernel-s3dev).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

DIR="${AGENTKERNEL_S3DEV_DIR:-/tmp/agentkernel-s3dev}"

running() { [ -s "$DIR/pid" ] && pid_alive "$(cat "$DIR/pid")"; }

case "${1:-}" in
start)
	if running; then
		log "the S3 server already runs (pid $(cat "$DIR/pid"))"
	else
		require_go
		rm -rf "$DIR"
		mkdir -p "$DIR"
		if ! s3_start "$DIR" >&2; then
			tail -20 "$DIR/log" >&2 2>/dev/null || true
			s3_stop "$DIR"
			exit 1
		fi
		log "the S3 server runs (pid $(cat "$DIR/pid"), $AGENTKERNEL_TEST_S3_ENDPOINT, objects in $DIR/data); stop it with scripts/s3dev.sh stop"
	fi
	cat "$DIR/env"
	;;
env)
	running || { log "no S3 server runs: scripts/s3dev.sh start"; exit 1; }
	cat "$DIR/env"
	;;
stop)
	s3_stop "$DIR"
	rm -rf "$DIR"
	log "stopped"
	;;
*)
	echo "usage: scripts/s3dev.sh start|env|stop" >&2
	exit 2
	;;
esac
