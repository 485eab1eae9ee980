package journal

// The op kinds: every side effect the daemon journals for a session.
// Adding one means adding it to Kinds, its rule to Decide and its words to
// RecoveryRules (kinds_test.go fails otherwise), answering seed 003's authoring checklist: what makes two
// attempts the same op, what recovery does if the process dies between the
// call and its result, whether the upstream dedupes, and what the agent
// sees when the answer is "we don't know".
const (
	// KindModelRequest is one streamed request to a model provider.
	KindModelRequest = "model_request"
	// KindToolExec is one tool call executed in the sandbox by the guest.
	KindToolExec = "tool_exec"
	// KindOutboundCall is one call to a third party the daemon makes on a
	// session's behalf: the clone of a github_repository resource today;
	// webhooks when they come.
	KindOutboundCall = "outbound_call"
	// KindMCPCall is one tools/call to an agent's MCP server.
	KindMCPCall = "mcp_call"
	// KindThreadCall is one message a coordinator sends to a session
	// thread: opening the thread with its first message, or a follow-up.
	KindThreadCall = "thread_call"
)

// Kinds lists every op kind; OpID refuses any other.
var Kinds = []string{KindModelRequest, KindToolExec, KindOutboundCall, KindMCPCall, KindThreadCall}

// RecoveryRules says in words what Decide does, per kind (Decide is the
// rule; kinds_test.go checks both cover every kind). For every kind:
// op_completed → the recorded result is replayed, never re-run.
var RecoveryRules = map[string]string{
	KindModelRequest: "completed: replay the recorded response. " +
		"Started, not completed: with the provider's idempotency_header set, resend the same request " +
		"under the same key (the op id) and let the upstream collapse the duplicate; without one, " +
		"continue from the partial output cached in the stream chunks (assistant prefill). " +
		"Either way a block already delivered is not delivered again.",
	KindToolExec: "completed: replay the recorded tool_result. " +
		"Started, not completed: ask the guest (GET /ops/{op_id}): finished → read its result.json; " +
		"unknown (never accepted) → run it; running → reattach and wait; accepted_gone (accepted, " +
		"not running, no result) → ambiguous: a tool_result error \"operation <op_id> may have " +
		"executed; verify before retrying\". Never a silent re-run.",
	KindOutboundCall: "completed: replay the recorded response. " +
		"Started, not completed: a call that only reads (a git clone) is redone into a fresh " +
		"directory; one whose upstream takes an idempotency key is resent with the op id as the key; " +
		"otherwise ambiguous: surface \"operation <op_id> may have executed; verify before retrying\" " +
		"to the agent. Never a silent re-run.",
	KindMCPCall: "completed: replay the recorded mcp_tool_result. " +
		"Started, not completed: MCP has no idempotency key and the server keeps no record the " +
		"daemon can ask, so the call is ambiguous: an mcp_tool_result error \"operation <op_id> " +
		"may have executed; verify before retrying\", recorded as the op's result. Never a silent re-run.",
	KindThreadCall: "completed: replay the recorded result. " +
		"Started, not completed: resend. The upstream is the daemon's own store, and everything the " +
		"call writes is keyed by the op id (the thread's id, the message's event id, the parent's " +
		"thread events' ids): a resend writes what is missing and collapses what is there, so a " +
		"thread is never opened twice and a message never delivered twice.",
}
