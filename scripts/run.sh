#!/usr/bin/env bash
# Runs agentkernel on its embedded defaults: SQLite in $AGENTKERNEL_HOME
# (default ~/.local/share/agentkernel), filesystem blobs, the process
# sandbox driver (bubblewrap), listening on 127.0.0.1:18888.
# It installs what that needs first. Extra arguments go to `agentkernel serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

require_go
command -v bwrap >/dev/null || apt_install bubblewrap
mkdir -p bin

# A cold build downloads the modules and compiles a few hundred packages,
# which takes minutes on a small machine: say so and show progress, rather
# than sit silent behind one line. Warm builds print only the two headings.
log "resolving dependencies (the first run downloads about 60 Go modules, one line each)"
total="$(CGO_ENABLED=0 go list -deps ./cmd/agentkernel | wc -l)"
[ "$total" -gt 0 ] || { log "go list failed"; exit 1; }
log "building bin/agentkernel from $total packages (the first build compiles them all: a few minutes on a small machine)"
CGO_ENABLED=0 go build -v -o bin/agentkernel ./cmd/agentkernel 2>&1 | awk -v total="$total" '
	/ |^#/ { print > "/dev/stderr"; next }  # compiler messages
	{ n++; if (n % 25 == 0) printf "==> compiled %d of at most %d packages (%s)\n", n, total, $0 > "/dev/stderr" }' ||
	{ log "build failed"; exit 1; }
log "starting agentkernel serve (Ctrl-C stops it)"
exec bin/agentkernel serve "$@"
