// Package object is agentkernel's durable object runtime (seed 002): classes,
// objects addressed by (class, id) that each live in their own sandbox
// ("do-{class}-{id}"), a per-object FIFO call queue, hibernation with a
// storage dump persisted in one transaction, wake with storage injection,
// alarms, limits, metrics and audit records.
//
// Isolation (issue 15): a class with isolation "class" puts the objects
// of one tenant and that class in shared sandboxes ("dc-{class}-{n}", up
// to objects_per_sandbox each, default 1000) whose one server process
// serves them all; see shared.go. Storage, per-object ordering (the gate)
// and hibernation stay per object; a shared sandbox starts for its first
// object and stops when its last one hibernates or is deleted. The
// max_active_objects budget counts sandboxes: an Active object of an
// object-mode class is one, a running shared sandbox is one whatever its
// number of objects, and the least recently used idle unit (an object, or
// a whole shared sandbox) makes room. Idle timeouts stay per object.
//
// The in-sandbox protocol, HTTP/1.1 to the object's server on
// 127.0.0.1:9333. The daemon speaks it over connections the guest dialed
// inside the sandbox and handed over (guest.Client.ObjectClient), kept
// alive from call to call, so a call crosses neither the guest nor a
// second HTTP hop; a guest from before that goes through its /proxy/.
//
// A call is delivered at most once per attempt: if nothing listens on
// :9333 (the method never ran) the server is started again and the call
// delivered once more; if the connection breaks once the request may have
// reached the server, the caller gets 503 sandbox_unavailable and the call
// is not sent again (in write-through mode the server then gets the
// persisted storage back before the next call).
//
//	GET    /__health          2xx once the server is ready (a server that
//	                          serves many objects adds X-Agentkernel-Objects: many)
//	GET    /__storage         → {"key": <json>, …}: the object's whole storage
//	POST   /__storage         {"key": <json>, …}: replace the object's storage
//	DELETE /__storage         forget the object (hibernated or deleted)
//	POST   /{method}          body: the call's args (JSON); answer: the result
//
// Every request but GET /__health carries X-Agentkernel-Object-Class and
// X-Agentkernel-Object-Id (the object; a server of a class-mode class
// keeps storage per id, and one without X-Agentkernel-Objects: many is
// refused for such a class with 503). Every method call also carries
// X-Agentkernel-Storage-Mode (snapshot or write-through), and
// alarm calls also X-Agentkernel-Alarm-Id, X-Agentkernel-Alarm-Retry-Count
// and X-Agentkernel-Alarm-Is-Retry. In write-through mode a helper library
// answers with X-Agentkernel-Envelope: 1 and the body
// {"result": <json>, "writes": [{"key": k, "value": <json>} | {"key": k,
// "delete": true}, …]} (on an error status "error" replaces "result"); the
// runtime makes the writes durable before it answers the caller with the
// unwrapped result or error. Without the envelope header the body is the
// result as-is.
package object
