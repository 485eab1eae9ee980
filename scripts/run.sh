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
log "building bin/agentkernel"
CGO_ENABLED=0 go build -o bin/agentkernel ./cmd/agentkernel
log "starting agentkernel serve (Ctrl-C stops it)"
exec bin/agentkernel serve "$@"
