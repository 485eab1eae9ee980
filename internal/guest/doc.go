// Package guest is the program that runs as PID 1 inside every sandbox
// (`agentkernel guest`) and the Client the daemon uses to talk to it.
//
// The guest serves HTTP/1.1 on two unix sockets. The guest is already
// inside the sandbox's namespaces, so every path it sees is a sandbox path.
//
// The daemon's socket carries the whole protocol below, and nothing inside
// the sandbox can replace or redirect it. The process driver creates it on
// the host, in a directory that is not mounted into the sandbox, and hands
// the listening socket down as an open file (--listen-fd). A docker guest
// creates it in a directory it shares with the host (--socket); the daemon
// follows no symlink there and talks only to a socket the container's init
// listens on (SO_PEERCRED). Either way every connection starts with a
// mutual challenge–response over the sandbox's secret (handshake.go), which
// the guest reads once from an inherited pipe or its stdin (--secret-fd)
// and which is never in a file, an argument or an environment variable.
// The guest makes itself non-dumpable, so no process in the sandbox can
// read its memory, environment or open files (/proc/1/mem, /proc/1/fd,
// pidfd_getfd), and every inherited file is close-on-exec: commands it
// starts get stdin, stdout and stderr only.
//
// The agent socket, /run/agentkernel/agent.sock (a tmpfs of the
// sandbox's own), takes POST /agent-events from the sandbox's processes
// and nothing else (the agentkernel-agent CLI); it needs no secret.
//
// # Protocol
//
// Bodies are JSON unless stated. Errors are a non-2xx status with
// {"error": "...", "code": "not_found|exists|bad_request|escapes_workspace|not_dir|is_dir|not_empty|internal"}.
// File errors name the path asked for and map every errno a caller's path
// can meet to a 4xx (read_only and permission 403, name_too_long,
// symlink_loop and not_regular_file 400, busy 409, too_large 413) or to
// no_space 507; names over 255 bytes and paths over 4095 are refused
// before any system call.
// Relative paths resolve against the work dir (/workspace).
//
// File paths containing a ".." segment are refused (bad_request). A file
// path that is the work dir or under it is resolved through an os.Root on
// the work dir: a symlink in the workspace that leads out of it (relative
// climbing out, or absolute — os.Root follows no absolute symlink, even
// one naming a workspace path) is never followed, and the operation fails
// with 400 escapes_workspace without reading or writing anything outside.
// Symlinks that stay inside are followed; a write through a final symlink
// writes its target in place (other writes are atomic). Absolute paths
// outside the work dir are the caller's explicit choice and work as usual.
//
//	GET  /health                     → {"ok":true,"pid":1,"uptime_ms":N}
//	POST /assign                     AssignRequest {"env":{…}} → 204; once: gives a pooled
//	                                   sandbox to its sandbox (see AssignRequest), 409 after
//	POST /exec                       ExecRequest → NDJSON stream of ExecFrame:
//	                                   {"stream":"stdout","data":"<base64>"} … then
//	                                   {"exit_code":N,"duration_ms":N,"timed_out":bool}
//	                                   (with op_id: 409 op_exists + {"op":OpStatus} if seen before)
//	GET  /ops/{op_id}?wait_ms=N      → OpStatus {"op_id","state","result"}; waits up to N ms
//	                                   for a running op to end
//	POST /processes                  ExecRequest → ProcessInfo (201); runs in background
//	GET  /processes                  → [ProcessInfo]
//	GET  /processes/{id}             → ProcessInfo
//	GET  /processes/{id}/output?stream=stdout|stderr&offset=N&limit=N → OutputChunk
//	POST /processes/{id}/kill        KillRequest → ProcessInfo
//	GET  /files/content?path=P[&max=N] → raw bytes of a regular file (413 over N)
//	PUT  /files/content?path=P&mode=0644  raw body → 204 (temp file + rename)
//	GET  /files/list?path=P          → [FileInfo]
//	GET  /files/stat?path=P          → FileInfo
//	POST /files/mkdir                MkdirRequest → 204 (mkdir -p)
//	POST /files/remove               RemoveRequest → 204
//	ANY  /proxy/…                    reverse proxy to http://127.0.0.1:9333/…
//	POST /object/conn                dials 127.0.0.1:9333 and answers on the raw
//	                                   connection: 'F' with the connected socket
//	                                   attached (SCM_RIGHTS), or 'E' and an error
//	                                   body (code refused|unreachable); see objconn.go
//
// # Processes
//
// Every command (exec or background) runs in its own process group. A
// timeout, a cancelled /exec request (the client went away) or a kill
// signals the whole group, so `sh -c 'sleep 100 & sleep 100'` leaves nothing
// behind. When an exec'd command exits, whatever is left in its group is
// killed too: use a background process for something that must keep running.
// A command whose binary does not exist ends with exit code 127 (126 when
// it is not executable), like a shell, not with an error.
//
// Background output goes to files in the guest's state dir
// (/.agentkernel/state, a tmpfs) and is read by offset, so a slow reader
// never blocks the process.
//
// # Op records
//
// An exec with an op_id (^op_[0-9a-f]{16,64}$, the op journal's id of the
// tool call, seed 003) is recorded in the runtime dir (--runtime-dir,
// /.agentkernel/runtime in a sandbox), under ops/<op_id>/: "accepted" is
// written before the command starts (durable against a machine crash
// once per boot, see oprecords.go),
// and result.json (exit code, timed_out, duration, the first MiB of stdout
// and stderr with truncated flags) is written atomically when it ends,
// before the last frame is sent. The daemon snapshots the runtime dir with
// the workspace at hibernation and restores both with the sandbox, so the
// records outlive the guest, without being among the user's files. The
// same op id is never run twice: a second exec gets 409 op_exists with the
// op's state. Such an exec is not killed when its client goes away: it
// runs on (bounded by its timeout) so its result is recorded, and recovery
// reattaches with GET /ops/{op_id}. State "accepted_gone" (accepted, not
// running here, no result) means the command died with an earlier guest
// and may have had its effect. Unpulled agent events are kept there too
// (agent-events/).
//
// Earlier versions kept both in /workspace/.agentkernel; a guest with a
// runtime dir moves them there when it starts (migrate.go). Without one
// (tests) it still uses /workspace/.agentkernel, which the files API
// leaves out of the listing of /workspace (it stays readable by path).
//
// # PID 1
//
// As PID 1 the guest inherits every orphan in the sandbox and must reap it.
// All waiting is done by one reaper (reaper.go): it calls wait4(-1) and
// hands the statuses of processes the guest started to their waiters, so
// reaping orphans never steals an exit status. Outside PID 1 (tests) it
// waits only for its own children. SIGTERM shuts the guest down: running
// process groups are killed and the socket is removed.
package guest
