#!/bin/sh
# Builds agentkernel's local Docker test image from Debian's busybox-static,
# without a registry: a tar rootfs imported with `docker import`.
#
# The image holds only busybox and its applet symlinks; the agentkernel guest
# is bind-mounted at start by the docker driver, never baked in.
#
# Idempotent: does nothing when the tag already exists with the current
# VERSION label (set FORCE=1 to rebuild anyway). Network: apt only, and
# only when busybox-static is missing.
#
# Usage: scripts/docker-image/build.sh [TAG]   (default agentkernel/sandbox:busybox)
set -eu

TAG="${1:-agentkernel/sandbox:busybox}"
DOCKER="${DOCKER:-docker}"

if ! command -v "$DOCKER" >/dev/null 2>&1; then
	echo "build.sh: $DOCKER not found: install docker.io" >&2
	exit 1
fi
if ! "$DOCKER" version >/dev/null 2>&1; then
	echo "build.sh: cannot reach dockerd: start dockerd, e.g. dockerd --host=unix:///var/run/docker.sock &" >&2
	exit 1
fi
# Bump when the image's content changes, so cached tags are rebuilt.
VERSION=2
old="$("$DOCKER" image inspect -f '{{.Id}}' "$TAG" 2>/dev/null || true)"
have="$("$DOCKER" image inspect -f '{{index .Config.Labels "agentkernel.image.version"}}' "$TAG" 2>/dev/null || true)"
if [ "${FORCE:-0}" != 1 ] && [ "$have" = "$VERSION" ]; then
	echo "build.sh: $TAG (version $VERSION) already present"
	exit 0
fi

BUSYBOX=/bin/busybox
# Debian's busybox-static installs a static /bin/busybox; the dynamic
# "busybox" package installs the same path, which would not run in an empty
# rootfs, so insist on the static one.
if ! dpkg -s busybox-static >/dev/null 2>&1; then
	apt-get -o DPkg::Lock::Timeout=600 install -y busybox-static
fi

ROOT="$(mktemp -d)"
trap 'rm -rf "$ROOT"' EXIT

mkdir -p "$ROOT/bin" "$ROOT/sbin" "$ROOT/usr/bin" "$ROOT/usr/sbin" \
	"$ROOT/tmp" "$ROOT/workspace" "$ROOT/run/agentkernel" "$ROOT/.agentkernel" \
	"$ROOT/etc" "$ROOT/proc" "$ROOT/sys" "$ROOT/dev"
chmod 1777 "$ROOT/tmp"
cp "$BUSYBOX" "$ROOT/bin/busybox"
# --list-full gives each applet's canonical path (bin/sh, usr/bin/env, …).
for applet in $("$ROOT/bin/busybox" --list-full); do
	[ "$applet" = bin/busybox ] && continue
	mkdir -p "$ROOT/$(dirname "$applet")"
	ln -sf /bin/busybox "$ROOT/$applet"
done
printf 'root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$ROOT/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$ROOT/etc/group"

tar -C "$ROOT" --owner=0 --group=0 --numeric-owner -c . | "$DOCKER" import \
	--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
	--change 'WORKDIR /workspace' \
	--change 'CMD ["/bin/sh"]' \
	--change "LABEL agentkernel.image.version=$VERSION" \
	--message 'agentkernel sandbox test image (busybox-static)' \
	- "$TAG"
# Drop the image this build replaced; harmless failure if a container uses it.
new="$("$DOCKER" image inspect -f '{{.Id}}' "$TAG")"
if [ -n "$old" ] && [ "$old" != "$new" ]; then
	"$DOCKER" image rm "$old" >/dev/null 2>&1 || true
fi
echo "build.sh: built $TAG (version $VERSION)"
