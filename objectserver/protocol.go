package objectserver

// The in-sandbox protocol between the agentkernel daemon and an object's
// server. The daemon side (internal/object) speaks exactly this; keep the two
// in step.
const (
	// DefaultPort is where the daemon expects the object's server.
	DefaultPort = "9333"
	// PortEnv overrides DefaultPort (tests run several servers at once).
	PortEnv = "AGENTKERNEL_OBJECT_PORT"

	// StoragePath serves GET (dump an object's storage), POST (replace it)
	// and DELETE (forget it), for the object the headers name.
	StoragePath = "/__storage"
	// HealthPath answers GET with {"ok": true} and HeaderObjects: many.
	HealthPath = "/__health"
	// HeaderObjects on GET /__health says the server keeps storage per
	// object id, so the daemon may give it many objects (a class with
	// isolation "class"); a server without it is refused for such a class.
	HeaderObjects = "X-Agentkernel-Objects"
	ObjectsMany   = "many"

	HeaderStorageMode = "X-Agentkernel-Storage-Mode"
	HeaderObjectClass = "X-Agentkernel-Object-Class"
	// HeaderObjectID names the object of a call or a /__storage request;
	// without it the object is "" (daemons from before isolation "class").
	HeaderObjectID        = "X-Agentkernel-Object-Id"
	HeaderAlarmID         = "X-Agentkernel-Alarm-Id"
	HeaderAlarmRetryCount = "X-Agentkernel-Alarm-Retry-Count"
	HeaderAlarmIsRetry    = "X-Agentkernel-Alarm-Is-Retry"
	// HeaderEnvelope is set to "1" on write-through responses, whose body is
	// {"result": …, "writes": […]} or {"error": …, "writes": […]}.
	HeaderEnvelope = "X-Agentkernel-Envelope"

	// ModeSnapshot: the daemon reads storage at hibernation and checkpoints.
	ModeSnapshot = "snapshot"
	// ModeWriteThrough: each call reports its writes so the daemon can make
	// them durable before it acknowledges the call.
	ModeWriteThrough = "write-through"
)
