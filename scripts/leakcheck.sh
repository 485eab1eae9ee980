#!/usr/bin/env bash
# Checks that a test run left nothing behind, and removes what it left.
# scripts/test.sh runs it after `go test`, with LEAK_WORK set to the run's
# work dir (whose tmp/ was the tests' TMPDIR). Everything a test starts
# mentions that dir: daemons (--home), bwrap sandboxes (their workspace
# bind), docker containers (their workspace mount). So the check only ever
# sees this run's leftovers, never another run's or another user's.
#
# Left behind, it reports and then removes:
#   - processes whose command line mentions the work dir (and their
#     descendants: a sandbox's guest runs under its bwrap), except this
#     run's own PostgreSQL and dockerd, which test.sh stops itself;
#   - docker containers made by agentkernel (label agentkernel.managed)
#     with a mount below the work dir;
#   - anything in the tests' TMPDIR.
# Exit status 1 when anything was left.
set -uo pipefail
. "$(dirname "$0")/lib.sh"

WORK="${LEAK_WORK:?LEAK_WORK must name the work dir of the test run}"
TMP="$WORK/tmp"
leaks=0

# Processes. The work dir travels in the environment, not in argv, so this
# script and its helpers never match themselves.
declare -A parent
matched=()
for d in /proc/[0-9]*; do
	pid="${d#/proc/}"
	stat="$(cat "$d/stat" 2>/dev/null)" || continue
	rest="${stat##*) }"
	set -- $rest
	parent[$pid]="$2"
	cmd="$(tr '\0' ' ' <"$d/cmdline" 2>/dev/null)" || continue
	case "$cmd" in
	*"$WORK/pg/"* | *"$WORK/dockerd.pid"*) ;; # this run's services
	*"$WORK"*) matched+=("$pid") ;;
	esac
done
if [ ${#matched[@]} -gt 0 ]; then
	# Add every descendant of a matched process.
	declare -A doomed
	for p in "${matched[@]}"; do doomed[$p]=1; done
	grew=1
	while [ $grew = 1 ]; do
		grew=0
		for p in "${!parent[@]}"; do
			if [ -z "${doomed[$p]:-}" ] && [ -n "${doomed[${parent[$p]}]:-}" ]; then
				doomed[$p]=1
				grew=1
			fi
		done
	done
	log "LEAK: processes still running after the tests:"
	for p in "${!doomed[@]}"; do
		printf '    %s %s\n' "$p" "$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-300)" >&2
	done
	leaks=1
	as_root kill -9 "${!doomed[@]}" 2>/dev/null || true
fi

# Docker containers.
if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
	for id in $(docker ps -aq --filter label=agentkernel.managed); do
		mounts="$(docker inspect -f '{{range .Mounts}}{{.Source}} {{end}}' "$id" 2>/dev/null)" || continue
		case "$mounts" in
		*"$WORK"*)
			log "LEAK: docker container $(docker inspect -f '{{.Name}} ({{.State.Status}}, labels {{json .Config.Labels}})' "$id")"
			leaks=1
			docker rm -f "$id" >/dev/null 2>&1 || true
			;;
		esac
	done
fi

# Temp files: t.TempDir removes its own; anything else is a leak.
if [ -d "$TMP" ]; then
	left="$(find "$TMP" -mindepth 1 -maxdepth 1 2>/dev/null)"
	if [ -n "$left" ]; then
		log "LEAK: temp files and dirs left in the tests' TMPDIR:"
		while IFS= read -r f; do
			printf '    %s (%s)\n' "$f" "$(du -sh "$f" 2>/dev/null | cut -f1)" >&2
		done <<<"$left"
		leaks=1
	fi
fi

if [ $leaks = 0 ]; then
	log "leak check: the tests left no process, container or temp file behind"
fi
exit $leaks
