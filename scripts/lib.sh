# Shared helpers for scripts/*.sh. Sourced, not run.

log() { printf '==> %s\n' "$*" >&2; }

as_root() {
	if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
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
		as_root apt-get update -qq >/dev/null
		APT_UPDATED=1
	fi
	log "installing ${missing[*]}"
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

require_go() {
	if ! command -v go >/dev/null; then
		[ -x /usr/local/go/bin/go ] && export PATH="/usr/local/go/bin:$PATH"
	fi
	command -v go >/dev/null || { log "Go is not installed (need Go 1.26+: https://go.dev/dl/)"; return 1; }
}
