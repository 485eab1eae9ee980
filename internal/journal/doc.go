// Package journal names side effects for the op journal of seed 003.
//
// Every side-effecting op of a turn (a model request, a tool exec in the
// sandbox, an outbound call) is journalled under an id derived from what it
// does and where in the turn it happens:
//
//	op_id = "op_" + hex(sha256(kind ‖ canonical JSON of args ‖ turn, step, index))
//
// so the same call replayed by recovery has the same id (and finds its
// journal row, or the guest's record of it), while two identical calls in
// one turn are two ops. The store keeps the rows (store.OpStore); this
// package only derives ids and lists the kinds with their recovery rules.
package journal
