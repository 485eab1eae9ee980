// Package monitor runs agent tasks in sandboxes and watches them (seed
// 001): it relays the agents' heartbeats and events from the guest into the
// store, decides from the activity summary whether each sandbox is
// CREATED/RUNNING/COMPLETED/RESUMED/IDLE/DEAD/TERMINATED (Decide), reaps
// idle, stuck and dead ones in the seed's termination order (transcript
// saved before the stop), and spawns diagnostic tasks for stuck workflows
// under every safeguard of the seed, all kept in the store.
//
// # Running a shell-script agent and watching it reaped
//
//	agentkernel serve &
//	agentkernel ticket create "say hello"                  # → tkt_…
//	agentkernel task run --ticket tkt_… -- /bin/sh -c '
//	    agentkernel-agent event agent.started
//	    echo "thinking…"
//	    while :; do agentkernel-agent heartbeat idle; sleep 10; done'
//	agentkernel task get tsk_…          # status, and the monitor's state and why
//	agentkernel task logs tsk_… --follow
//	# three minutes without a work event: IDLE → transcript saved, sandbox
//	# hibernated, task failed "idle_timeout", SANDBOX_TERMINATED_IDLE audited
//	agentkernel task transcript tsk_…
//	agentkernel ticket show tkt_…
//
// Inside a task's sandbox, agentkernel-agent (on PATH; it runs the guest
// binary's `agent-event` command) posts to the guest's agent socket,
// /run/agentkernel/agent.sock, which takes agent events and nothing else:
//
//	agentkernel-agent heartbeat idle|running|degraded|failed [--data JSON]
//	agentkernel-agent event TYPE [--data JSON]
//
// Work events: agent.file_edited, agent.tool_completed,
// agent.subagent_completed, agent.skill_completed, agent.completed,
// agent.assistant_message, agent.tool_use, agent.tool_result. Non-work:
// agent.heartbeat, agent.started, agent.thinking, agent.error. Clients
// outside the sandbox use POST /v1/sandboxes/{id}/events.
//
// The guest appends each event to its runtime dir (/.agentkernel/runtime,
// backed up with the workspace but not in it) before it answers; the daemon long-polls GET /agent-events?after=N, which
// acknowledges everything up to N, so events reach the store at least once
// and in order, across guest and daemon restarts. Decisions use the
// daemon's receive time unless a client posts its own "at".
//
// Termination stops the sandbox with Hibernate by default ([monitor] stop):
// the workspace — the agent's actual work product — is kept in a verified
// backup and on disk, so it can be woken for debugging or resumption, while
// the processes stop costing anything; "destroy" also removes the host
// directories (a final backup is still taken).
package monitor
