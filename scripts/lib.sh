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
