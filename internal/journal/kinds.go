package journal

// The op kinds: every side effect a turn journals. Adding one means adding
// it to Kinds and its rule to RecoveryRules (kinds_test.go fails
// otherwise), answering seed 003's authoring checklist: what makes two
// attempts the same op, what recovery does if the process dies between the
// call and its result, whether the upstream dedupes, and what the agent
// sees when the answer is "we don't know".
const (
	// KindModelRequest is one streamed request to a model provider.
	KindModelRequest = "model_request"
	// KindToolExec is one tool call executed in the sandbox by the guest.
	KindToolExec = "tool_exec"
	// KindOutboundCall is one HTTP call to a third party made on the
	// agent's behalf (vault-bearing or paid APIs, webhooks).
	KindOutboundCall = "outbound_call"
	// KindMCPCall is one tools/call to an agent's MCP server.
	KindMCPCall = "mcp_call"
)

// Kinds lists every op kind; OpID refuses any other.
var Kinds = []string{KindModelRequest, KindToolExec, KindOutboundCall, KindMCPCall}

// RecoveryRules says, per kind, what recovery does with an op it finds in
// the journal. For every kind: op_completed → the recorded result is
// replayed, never re-run.
var RecoveryRules = map[string]string{
	KindModelRequest: "completed: replay the recorded response. " +
		"Started, not completed: continue from the partial output cached in the stream chunks " +
		"(assistant prefill), never a blind re-issue; the op id goes to providers that take an " +
		"idempotency key.",
	KindToolExec: "completed: replay the recorded tool_result. " +
		"Started, not completed: ask the guest (GET /ops/{op_id}): finished → read its result.json; " +
		"unknown (never accepted) → run it; running → reattach and wait; accepted_gone (accepted, " +
		"not running, no result) → ambiguous: a tool_result error \"operation <op_id> may have " +
		"executed; verify before retrying\". Never a silent re-run.",
	KindOutboundCall: "completed: replay the recorded response. " +
		"Started, not completed: if the upstream takes an idempotency key, resend with the op id " +
		"as the key and let it collapse the duplicate; otherwise ambiguous: surface \"operation " +
		"<op_id> may have executed; verify before retrying\" to the agent. Never a silent re-run.",
	KindMCPCall: "completed: replay the recorded mcp_tool_result. " +
		"Started, not completed: MCP has no idempotency key and the server keeps no record the " +
		"daemon can ask, so the call is ambiguous: an mcp_tool_result error \"operation <op_id> " +
		"may have executed; verify before retrying\", recorded as the op's result. Never a silent re-run.",
}
