#!/usr/bin/env bash
# Side by side with Cloudflare's workerd (issue 15): the same counter durable
# object on both, the same closed-loop Go client (scripts/bench/loadclient),
# turns A B A B in one run, ratios agentkernel/workerd. A bench command, run
# by hand; no test and no CI step runs it.
#
#   scripts/bench/compare-workerd.sh [--duration 10s] [--concurrency 16]
#       [--objects 1000] [--isolation class|object] [--turns 2]
#       [--rows hot-snapshot,hot-write-through,many-write-through,many-snapshot]
#       [--skip-install] [--agentkernel-only] [--keep]
#
# What it does:
#   - installs workerd@$WORKERD_VERSION from npm into
#     ${XDG_CACHE_HOME:-$HOME/.cache}/agentkernel-bench (--skip-install: use
#     that cache as it is, without npm);
#   - writes a workerd config: a SQLite-backed Durable Object class (enableSql,
#     storage on local disk) whose increment(amount) reads "count", adds and
#     writes it back (the KV API on the SQLite backend) and returns the new
#     value, behind a fetch worker routing POST /obj/<id>/increment to it;
#   - builds agentkernel (CGO_ENABLED=0 ./cmd/agentkernel) and the Go counter
#     (objectserver/examples/counter) as a static binary in an app dir, and
#     runs `agentkernel serve` with a fresh home and two [[objects]] classes,
#     counter (storage_mode snapshot) and wcounter (write-through), both with
#     isolation = --isolation, every other limit at its default
#     (max_active_objects = 200); calls go through the REST API with a
#     tenant's API key made with the CLI;
#   - rows: one hot object (snapshot, write-through; workerd: its default
#     durable storage), and --objects warmed objects (every object called
#     once first, then measured) per storage mode. Before every turn the
#     client calls each object of that system once, untimed: workerd evicts
#     a Durable Object idle for ~10 s, which the other system's turn would
#     otherwise cause (agentkernel's idle timeout is 300 s). The many-object rows each
#     start both systems fresh and measure PSS (/proc/<pid>/smaps_rollup):
#     idle before warming, and after the row — workerd's processes against
#     the daemon plus every sandbox process (the daemon's children and any
#     process whose command line names its home, with descendants);
#   - prints markdown tables ready for BENCHMARKS.md, and `uptime` before and
#     after each row.
# Durability differs (see BENCHMARKS.md): workerd fsyncs every write;
# agentkernel's SQLite store commits with synchronous=NORMAL (survives a
# crash of the daemon, not of the OS).
# Everything it starts (workerd, the daemon, sandboxes, their cgroups, the
# temp dir) is stopped and removed on exit, Ctrl-C and failure included.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT="$(pwd)"

WORKERD_VERSION="1.20261117.1"
COMPAT_DATE="2025-09-01"

duration=10s
concurrency=16
objects=1000
isolation=class
turns=2
rows="hot-snapshot,hot-write-through,many-write-through,many-snapshot"
skip_install=0
ak_only=0
keep=0

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
}

while [ $# -gt 0 ]; do
	case "$1" in
	--duration) duration="${2:?}"; shift 2 ;;
	--concurrency) concurrency="${2:?}"; shift 2 ;;
	--objects) objects="${2:?}"; shift 2 ;;
	--isolation) isolation="${2:?}"; shift 2 ;;
	--turns) turns="${2:?}"; shift 2 ;;
	--rows) rows="${2:?}"; shift 2 ;;
	--skip-install) skip_install=1; shift ;;
	--agentkernel-only) ak_only=1; shift ;;
	--keep) keep=1; shift ;;
	-h | --help) usage ;;
	*) echo "compare-workerd: unknown argument $1" >&2; usage ;;
	esac
done
case "$isolation" in class | object) ;; *) echo "compare-workerd: --isolation must be class or object" >&2; exit 2 ;; esac
for r in ${rows//,/ }; do
	case "$r" in hot-snapshot | hot-write-through | many-write-through | many-snapshot) ;;
	*) echo "compare-workerd: unknown row $r" >&2; exit 2 ;; esac
done

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'compare-workerd: %s\n' "$*" >&2; exit 1; }

TMP="$(mktemp -d /tmp/akwd.XXXXXX)"
BIN="$TMP/bin"
APP="$TMP/app"
mkdir -p "$BIN" "$APP"

ak_pid=""
ak_home=""
wd_pid=""
lc_pid=""

# pids_matching STR: every process whose command line contains STR, and
# every descendant of one (a sandbox's guest and server run under its
# bwrap, in sessions of their own). This script's own processes never
# carry STR in their command lines.
pids_matching() {
	local match="$1" d pid stat rest cmd grew p
	local -A parent=() doomed=()
	for d in /proc/[0-9]*; do
		pid="${d#/proc/}"
		stat="$({ cat "$d/stat"; } 2>/dev/null)" || continue
		rest="${stat##*) }"
		read -r _ p _ <<<"$rest"
		parent[$pid]="$p"
		cmd="$({ tr '\0' ' ' <"$d/cmdline"; } 2>/dev/null)" || continue
		case "$cmd" in *"$match"*) doomed[$pid]=1 ;; esac
	done
	[ ${#doomed[@]} -gt 0 ] || return 0
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
	echo "${!doomed[@]}"
}

stop_workerd() {
	[ -n "$wd_pid" ] || return 0
	kill "$wd_pid" 2>/dev/null || true
	wait "$wd_pid" 2>/dev/null || true
	wd_pid=""
}

# stop_daemon: SIGTERM (graceful: in-flight requests finish), SIGKILL after
# 60 s; then the sandboxes it leaves running by design (they outlive a
# daemon restart) are killed, and their cgroups removed.
stop_daemon() {
	if [ -n "$ak_pid" ]; then
		kill -TERM "$ak_pid" 2>/dev/null || true
		local i
		for i in $(seq 600); do
			kill -0 "$ak_pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$ak_pid" 2>/dev/null || true
		wait "$ak_pid" 2>/dev/null || true
		ak_pid=""
	fi
	[ -n "$ak_home" ] || return 0
	local pids n
	for n in 1 2 3 4 5; do
		pids="$(pids_matching "$ak_home/")"
		[ -n "$pids" ] || break
		# shellcheck disable=SC2086 # a list of pids
		kill -KILL $pids 2>/dev/null || true
		sleep 0.2
	done
	remove_cgroups "$ak_home"
	ak_home=""
}

# remove_cgroups HOME: the cgroups the daemon made for HOME's sandboxes
# (named after the sandbox ids, under every controller's hierarchy).
remove_cgroups() {
	local home="$1" d
	[ -d "$home/sandboxes" ] && [ -d /sys/fs/cgroup ] || return 0
	local -A ids=()
	for d in "$home"/sandboxes/sbx_*; do
		[ -e "$d" ] && ids[${d##*/}]=1
	done
	[ ${#ids[@]} -gt 0 ] || return 0
	while IFS= read -r d; do
		if [ -n "${ids[${d##*/}]:-}" ]; then
			rmdir "$d" 2>/dev/null || true
		fi
	done < <(find /sys/fs/cgroup -maxdepth 7 -type d -name 'sbx_*' 2>/dev/null)
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	[ -z "$lc_pid" ] || kill -KILL "$lc_pid" 2>/dev/null || true
	stop_workerd
	stop_daemon
	# Whatever else still names the temp dir (a daemon of an earlier phase
	# that failed half-way, its sandboxes).
	local pids
	pids="$(pids_matching "$TMP")"
	# shellcheck disable=SC2086 # a list of pids
	[ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
	for d in "$TMP"/home-*; do
		[ -d "$d" ] && remove_cgroups "$d"
	done
	if [ "$keep" = 1 ]; then
		log "kept $TMP"
	else
		rm -rf "$TMP"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------- workerd
cache="${XDG_CACHE_HOME:-$HOME/.cache}/agentkernel-bench/workerd-$WORKERD_VERSION"
case "$(uname -m)" in
x86_64) wd_platform=linux-64 ;;
aarch64 | arm64) wd_platform=linux-arm64 ;;
*) wd_platform="" ;;
esac
WORKERD="$cache/node_modules/@cloudflare/workerd-$wd_platform/bin/workerd"
if [ "$ak_only" = 0 ]; then
	[ -n "$wd_platform" ] || die "workerd has no npm build for $(uname -m); run with --agentkernel-only"
	if [ "$skip_install" = 0 ]; then
		command -v npm >/dev/null || die "npm not found: install Node.js, or run with --agentkernel-only"
		log "installing workerd@$WORKERD_VERSION from npm into $cache"
		mkdir -p "$cache"
		npm install --prefix "$cache" --no-audit --no-fund --loglevel error "workerd@$WORKERD_VERSION" >&2
	fi
	[ -x "$WORKERD" ] || die "no workerd binary at $WORKERD (without --skip-install the npm install puts it there)"
	if ! wd_version="$("$WORKERD" --version 2>&1)"; then
		die "workerd does not run on this machine: $wd_version (ldd: $(ldd "$WORKERD" 2>&1 | grep -i 'not found\|version' | head -3 | tr '\n' ' ')); run with --agentkernel-only"
	fi
	log "$wd_version ($WORKERD)"
fi

# -------------------------------------------------------------- builds
log "building agentkernel, the Go counter object and the load client"
CGO_ENABLED=0 go build -o "$BIN/agentkernel" ./cmd/agentkernel
CGO_ENABLED=0 go build -o "$APP/counter" ./objectserver/examples/counter
go build -o "$BIN/loadclient" ./scripts/bench/loadclient
LC="$BIN/loadclient"

# ---------------------------------------------------------- start/stop
phase=0
ak_url=""
ak_key=""
wd_url=""

start_workerd() {
	[ "$ak_only" = 0 ] || return 0
	local dir="$TMP/workerd-$phase" port i
	mkdir -p "$dir/do"
	port="$("$LC" freeport)"
	cat >"$dir/worker.js" <<'EOF'
import { DurableObject } from "cloudflare:workers";

// The counter of agentkernel's objectserver/examples/counter: "count" in
// the object's storage (the KV API, here on the SQLite backend);
// increment returns the new value.
export class Counter extends DurableObject {
  async increment(amount) {
    const n = ((await this.ctx.storage.get("count")) ?? 0) + amount;
    await this.ctx.storage.put("count", n);
    return n;
  }
  async get() {
    return (await this.ctx.storage.get("count")) ?? 0;
  }
}

export default {
  async fetch(request, env) {
    const m = new URL(request.url).pathname.match(/^\/obj\/([^/]+)\/(increment|get)$/);
    if (!m || request.method !== "POST") return new Response("not found\n", { status: 404 });
    const stub = env.COUNTER.get(env.COUNTER.idFromName(m[1]));
    if (m[2] === "get") return Response.json({ value: await stub.get() });
    const body = await request.text();
    const amount = body ? (JSON.parse(body).amount ?? 1) : 1;
    return Response.json({ value: await stub.increment(amount) });
  },
};
EOF
	cat >"$dir/config.capnp" <<EOF
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "main", worker = .counterWorker),
    (name = "do-disk", disk = (path = "$dir/do", writable = true)),
  ],
  sockets = [(name = "http", address = "127.0.0.1:$port", http = (), service = "main")],
);

const counterWorker :Workerd.Worker = (
  compatibilityDate = "$COMPAT_DATE",
  modules = [(name = "worker.js", esModule = embed "worker.js")],
  durableObjectNamespaces = [
    (className = "Counter", uniqueKey = "agentkernel-bench-counter", enableSql = true),
  ],
  durableObjectStorage = (localDisk = "do-disk"),
  bindings = [(name = "COUNTER", durableObjectNamespace = "Counter")],
);
EOF
	# setsid: a Ctrl-C at the terminal reaches this script, which stops
	# both systems itself, not the servers in the middle of a row.
	setsid "$WORKERD" serve "$dir/config.capnp" >"$dir/workerd.log" 2>&1 &
	wd_pid=$!
	wd_url="http://127.0.0.1:$port"
	for i in $(seq 300); do
		kill -0 "$wd_pid" 2>/dev/null || { tail -20 "$dir/workerd.log" >&2; die "workerd exited at start (log above)"; }
		curl -sf -o /dev/null -X POST "$wd_url/obj/probe/get" && return 0
		sleep 0.1
	done
	tail -20 "$dir/workerd.log" >&2
	die "workerd did not answer on $wd_url within 30 s"
}

start_daemon() {
	ak_home="$TMP/home-$phase"
	local cfg="$TMP/agentkernel-$phase.toml" port i iso="" cls mode tenant
	mkdir -p "$ak_home"
	port="$("$LC" freeport)"
	[ "$isolation" = object ] || iso="isolation = \"$isolation\""
	{
		printf 'listen = "127.0.0.1:%s"\nhome = "%s"\n\n[sandbox]\nrun_dir = "%s"\n\n[durable_objects]\napp_roots = ["%s"]\n' \
			"$port" "$ak_home" "$TMP/run-$phase" "$APP"
		for cls in counter:snapshot wcounter:write-through; do
			mode="${cls#*:}"
			printf '\n[[objects]]\nclass = "%s"\napp_dir = "%s"\ninit_command = ["/app/counter"]\nstorage_mode = "%s"\n%s\n' \
				"${cls%%:*}" "$APP" "$mode" "$iso"
		done
	} >"$cfg"
	setsid "$BIN/agentkernel" serve --config "$cfg" >"$TMP/daemon-$phase.log" 2>&1 &
	ak_pid=$!
	ak_url="http://127.0.0.1:$port"
	for i in $(seq 600); do
		if ! kill -0 "$ak_pid" 2>/dev/null; then
			tail -20 "$TMP/daemon-$phase.log" >&2
			if grep -q 'unknown key.*objects.isolation' "$TMP/daemon-$phase.log"; then
				die "this agentkernel has no [[objects]] isolation yet (it arrives with class isolation); run with --isolation object"
			fi
			die "agentkernel serve exited at start (log above; config: $cfg)"
		fi
		curl -sf -o /dev/null "$ak_url/healthz" && break
		sleep 0.1
	done
	curl -sf -o /dev/null "$ak_url/healthz" || die "agentkernel did not answer on $ak_url within 60 s"
	# A tenant and its API key, made with the CLI as README shows (the CLI
	# finds the admin key in the home).
	tenant="$(AGENTKERNEL_HOME="$ak_home" AGENTKERNEL_URL="$ak_url" "$BIN/agentkernel" tenant create bench 2>>"$TMP/cli.log")" ||
		die "tenant create failed: $(tail -1 "$TMP/cli.log")"
	ak_key="$(AGENTKERNEL_HOME="$ak_home" AGENTKERNEL_URL="$ak_url" "$BIN/agentkernel" key create --name bench --tenant "$tenant" 2>>"$TMP/cli.log")" ||
		die "key create failed: $(tail -1 "$TMP/cli.log")"
}

start_both() {
	phase=$((phase + 1))
	start_daemon
	start_workerd
}

stop_both() {
	stop_workerd
	stop_daemon
}

# pss_kb SYSTEM: "<kB> <processes>" summed over SYSTEM's processes.
pss_kb() {
	case "$1" in
	workerd) "$LC" pss "$wd_pid" ;;
	agentkernel) "$LC" pss -match "$ak_home/" "$ak_pid" ;;
	esac
}

mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }

# ------------------------------------------------------------------ rows
results="$TMP/rows.md"
pss_rows="$TMP/pss.md"
loads="$TMP/loads.txt"
: >"$results"
: >"$pss_rows"
: >"$loads"

run_row() { # run_row LABEL CLASS OBJECTS PREFIX
	local label="$1" class="$2" n="$3" prefix="$4" wd=()
	[ "$ak_only" = 1 ] || wd=(-workerd-url "$wd_url")
	echo "$label — before: $(uptime)" >>"$loads"
	log "$label (uptime: $(uptime | sed 's/.*load/load/'))"
	# In the background and waited for, so that a signal runs the trap at
	# once (bash defers traps while a foreground child runs).
	"$LC" run -name "$label" -objects "$n" -id-prefix "$prefix" -concurrency "$concurrency" \
		-duration "$duration" -turns "$turns" -ak-url "$ak_url" -ak-key "$ak_key" -ak-class "$class" \
		"${wd[@]}" >>"$results" &
	lc_pid=$!
	wait "$lc_pid" || failed+=("$label")
	lc_pid=""
	echo "$label — after: $(uptime)" >>"$loads"
}

failed=()
hot_rows=()
many_rows=()
for r in ${rows//,/ }; do
	case "$r" in
	hot-*) hot_rows+=("${r#hot-}") ;;
	many-*) many_rows+=("${r#many-}") ;;
	esac
done
class_of() { if [ "$1" = snapshot ]; then echo counter; else echo wcounter; fi; }

if [ ${#hot_rows[@]} -gt 0 ]; then
	start_both
	for mode in "${hot_rows[@]}"; do
		run_row "1 hot object, agentkernel $mode" "$(class_of "$mode")" 1 "hot-$mode"
	done
	stop_both
fi

for mode in "${many_rows[@]}"; do
	start_both
	sleep 2 # let both settle before the idle figure
	read -r ak_idle _ <<<"$(pss_kb agentkernel)"
	wd_idle=0
	[ "$ak_only" = 1 ] || read -r wd_idle _ <<<"$(pss_kb workerd)"
	run_row "$objects warmed objects, agentkernel $mode" "$(class_of "$mode")" "$objects" "many-$mode"
	read -r ak_after ak_procs <<<"$(pss_kb agentkernel)"
	live="$("$LC" active -ak-url "$ak_url" -ak-key "$ak_key" -ak-class "$(class_of "$mode")")"
	printf '| %s warmed objects, %s | agentkernel (%s) | %s | %s | %s | %s | %s | %s |\n' \
		"$objects" "$mode" "$isolation" "$(mib "$ak_idle")" "$(mib "$ak_after")" "$ak_procs" "$live" \
		"$(awk -v a="$ak_after" -v b="$ak_idle" -v n="$objects" 'BEGIN { printf "%.2f", (a - b) / 1024 / n }')" \
		"$(awk -v a="$ak_after" -v b="$ak_idle" -v n="$live" 'BEGIN { if (n > 0) printf "%.2f", (a - b) / 1024 / n; else printf "—" }')" >>"$pss_rows"
	if [ "$ak_only" = 0 ]; then
		read -r wd_after wd_procs <<<"$(pss_kb workerd)"
		printf '| %s warmed objects, %s | workerd | %s | %s | %s | %s (all) | %s | %s |\n' \
			"$objects" "$mode" "$(mib "$wd_idle")" "$(mib "$wd_after")" "$wd_procs" "$objects" \
			"$(awk -v a="$wd_after" -v b="$wd_idle" -v n="$objects" 'BEGIN { printf "%.2f", (a - b) / 1024 / n }')" \
			"$(awk -v a="$wd_after" -v b="$wd_idle" -v n="$objects" 'BEGIN { printf "%.2f", (a - b) / 1024 / n }')" >>"$pss_rows"
	fi
	stop_both
done

# ---------------------------------------------------------------- report
echo
echo "Command: scripts/bench/compare-workerd.sh --duration $duration --concurrency $concurrency --objects $objects --isolation $isolation --turns $turns --rows $rows$([ "$ak_only" = 1 ] && echo ' --agentkernel-only')"
if [ "$ak_only" = 1 ]; then
	wd_desc="workerd not run"
else
	wd_desc="$wd_version (npm workerd@$WORKERD_VERSION), compatibility date $COMPAT_DATE, SQLite-backed Durable Object on local disk"
fi
echo "agentkernel $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'), isolation = \"$isolation\", default limits; $wd_desc"
echo "$concurrency closed-loop callers, $turns turns of $duration per system alternating (A B A B), $(nproc) CPUs"
echo
echo "| row | agentkernel calls/s (per turn) | agentkernel p50 / p99 ms | workerd calls/s (per turn) | workerd p50 / p99 ms | agentkernel / workerd calls/s (p50) |"
echo "|---|---|---|---|---|---|"
cat "$results"
if [ -s "$pss_rows" ]; then
	echo
	echo "| PSS | system | idle MiB | after the row MiB | processes | live objects | Δ per object MiB | Δ per live object MiB |"
	echo "|---|---|---|---|---|---|---|---|"
	cat "$pss_rows"
fi
echo
echo "Load (uptime) around each row:"
sed 's/^/    /' "$loads"
if [ ${#failed[@]} -gt 0 ]; then
	echo
	printf 'FAILED (calls failed or lost updates, see the log above): %s\n' "${failed[@]}"
	exit 1
fi
