// Package journal names side effects for the op journal of seed 003.
//
// Every side-effecting op the daemon makes for a session (a model request,
// a tool exec in the sandbox, an MCP call, an outbound call such as a
// repository clone) is journalled under an id derived from what it
// does and where in the turn it happens:
//
//	op_id = "op_" + hex(sha256(kind ‖ canonical JSON of args ‖ turn, step, index))
//
// so the same call replayed by recovery has the same id (and finds its
// journal row, or the guest's record of it), while two identical calls in
// one turn are two ops. The store keeps the rows (store.OpStore); this
// package derives ids, lists the kinds and decides, per kind, what
// recovery does with an op it finds (Decide): the one decision table every
// journalled call site consults. Where the upstream takes an idempotency
// key (a model gateway named by a provider's idempotency_header), the op
// id is the key, so a resend after a crash is the same request to it.
package journal
