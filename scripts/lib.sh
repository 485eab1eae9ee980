# shellcheck shell=bash
# Shared helpers for scripts/*.sh. Sourced, not run.

log() { printf '==> %s\n' "$*" >&2; }

as_root() {
	if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# apt_get runs apt-get non-interactively, waiting up to 10 minutes for a
# dpkg lock another apt or unattended-upgrades holds, instead of failing.
# (DPkg::Lock::Timeout covers the dpkg locks; `apt-get update` takes the
# lists lock, which it does not wait for, so that is retried here.)
apt_get() {
	local out deadline=$((SECONDS + 600))
	while :; do
		if out="$(as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 "$@" 2>&1)"; then
			return 0
		fi
		case "$out" in
		*"Could not get lock"* | *"Unable to lock"* | *"is held by process"*)
			if [ $SECONDS -ge $deadline ]; then
				printf '%s\n' "$out" >&2
				log "the apt lock was not released within 10 minutes"
				return 1
			fi
			log "waiting for the apt lock another process holds"
			sleep 10
			;;
		*)
			printf '%s\n' "$out" >&2
			return 1
			;;
		esac
	done
}

# apt_install PKG... installs the Debian packages that are missing, running
# `apt-get update` once first.
APT_UPDATED=""
apt_install() {
	local missing=()
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	if ! command -v apt-get >/dev/null; then
		log "missing packages ${missing[*]} and no apt-get: install them by hand"
		return 1
	fi
	if [ -z "$APT_UPDATED" ]; then
		log "apt-get update"
		apt_get update -qq
		APT_UPDATED=1
	fi
	log "installing ${missing[*]}"
	apt_get install -y -qq --no-install-recommends "${missing[@]}"
}

require_go() {
	if ! command -v go >/dev/null; then
		[ -x /usr/local/go/bin/go ] && export PATH="/usr/local/go/bin:$PATH"
	fi
	command -v go >/dev/null || { log "Go is not installed (need Go 1.26+: https://go.dev/dl/)"; return 1; }
}

# The S3-compatible server the blob engine s3's tests run against: Versity's
# S3 gateway (github.com/versity/versitygw, Apache-2.0) over a directory.
# It is a Go module, so it builds from the Go module proxy like the rest of
# the project: about 2 minutes on 2 cores the first time, then cached (in
# $AGENTKERNEL_CACHE, default ~/.cache/agentkernel) and started in under a
# second. scripts/test.sh runs one per test run; scripts/s3dev.sh runs one
# for a developer.
VERSITYGW_VERSION=v1.8.0
S3_TEST_ACCESS_KEY=agentkernel-test
S3_TEST_SECRET_KEY=agentkernel-test-secret
S3_TEST_BUCKET=agentkernel-test

# s3_server_bin prints the path of the versitygw binary, building it first
# if the cache does not have it.
s3_server_bin() {
	local dir="${AGENTKERNEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agentkernel}/versitygw-$VERSITYGW_VERSION"
	if [ ! -x "$dir/versitygw" ]; then
		log "building versitygw $VERSITYGW_VERSION, the tests' S3 server (once: about 2 minutes; cached in $dir)"
		local tmp
		tmp="$(mktemp -d "${dir%/*}/.build.XXXXXX" 2>/dev/null || { mkdir -p "${dir%/*}" && mktemp -d "${dir%/*}/.build.XXXXXX"; })" || return 1
		if ! CGO_ENABLED=0 GOBIN="$tmp" go install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION" >&2; then
			rm -rf "$tmp"
			return 1
		fi
		mkdir -p "$dir" && mv "$tmp/versitygw" "$dir/versitygw" && rmdir "$tmp" || return 1
	fi
	printf '%s\n' "$dir/versitygw"
}

# free_port prints a TCP port nobody listens on at 127.0.0.1.
free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# s3_start DIR starts the S3 server on a free loopback port, its objects in
# DIR/data, its log in DIR/log and its pid in DIR/pid, creates the test
# bucket, writes the AGENTKERNEL_TEST_S3_* exports to DIR/env and exports
# them. Returns non-zero when the server does not come up (DIR/log says why).
s3_start() {
	local dir="$1" bin port pid url
	bin="$(s3_server_bin)" || return 1
	mkdir -p "$dir/data"
	port="$(free_port)" || return 1
	url="http://127.0.0.1:$port"
	ROOT_ACCESS_KEY_ID="$S3_TEST_ACCESS_KEY" ROOT_SECRET_ACCESS_KEY="$S3_TEST_SECRET_KEY" \
		nohup "$bin" --port "127.0.0.1:$port" --quiet posix "$dir/data" >"$dir/log" 2>&1 </dev/null &
	pid=$!
	echo "$pid" >"$dir/pid"
	for _ in $(seq 1 100); do
		[ "$(curl -s -o /dev/null -w '%{http_code}' "$url/" 2>/dev/null)" != 000 ] && break
		pid_alive "$pid" || { log "the S3 server exited at start"; return 1; }
		sleep 0.1
	done
	# CreateBucket, signed (SigV4) by curl; the hash is that of the empty body.
	local code
	code="$(curl -s -o "$dir/create-bucket.out" -w '%{http_code}' -X PUT \
		-H 'x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855' \
		--aws-sigv4 'aws:amz:us-east-1:s3' --user "$S3_TEST_ACCESS_KEY:$S3_TEST_SECRET_KEY" "$url/$S3_TEST_BUCKET")"
	if [ "$code" != 200 ]; then
		log "the S3 server at $url did not create bucket $S3_TEST_BUCKET (HTTP $code): $(cat "$dir/create-bucket.out" 2>/dev/null)"
		return 1
	fi
	cat >"$dir/env" <<-ENV
		export AGENTKERNEL_TEST_S3_ENDPOINT=$url
		export AGENTKERNEL_TEST_S3_ACCESS_KEY_ID=$S3_TEST_ACCESS_KEY
		export AGENTKERNEL_TEST_S3_SECRET_ACCESS_KEY=$S3_TEST_SECRET_KEY
		export AGENTKERNEL_TEST_S3_BUCKET=$S3_TEST_BUCKET
		export AGENTKERNEL_TEST_S3_REGION=us-east-1
	ENV
	. "$dir/env"
}

# s3_stop DIR stops the server s3_start DIR started (nothing when none runs)
# and waits until it is gone. A pid file that outlived its server (the pid
# may be another process's by now) only signals a process whose command
# line names DIR/data.
s3_stop() {
	local dir="$1" pid
	[ -s "$dir/pid" ] || return 0
	pid="$(cat "$dir/pid")"
	if pid_alive "$pid" && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "posix $dir/data"; then
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 1 100); do pid_alive "$pid" || break; sleep 0.1; done
		if pid_alive "$pid"; then
			log "the S3 server (pid $pid) ignored SIGTERM for 10s: killing it"
			kill -9 "$pid" 2>/dev/null || true
		fi
	fi
	# Reap it when it is this shell's child (test.sh); a no-op otherwise.
	wait "$pid" 2>/dev/null || true
	rm -f "$dir/pid"
}

# pid_alive PID: the process runs (a zombie waiting to be reaped does not).
pid_alive() {
	local stat
	stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
	stat="${stat##*) }"
	[ "${stat%% *}" != Z ]
}
