package objectserver

// The in-sandbox protocol between the agentkernel daemon and an object's
// server. The daemon side (internal/object) speaks exactly this; keep the two
// in step.
const (
	// DefaultPort is where the daemon expects the object's server.
	DefaultPort = "9333"
	// PortEnv overrides DefaultPort (tests run several servers at once).
	PortEnv = "AGENTKERNEL_OBJECT_PORT"

	// StoragePath serves GET (dump all storage) and POST (replace all storage).
	StoragePath = "/__storage"
	// HealthPath answers GET with {"ok": true}.
	HealthPath = "/__health"

	HeaderStorageMode     = "X-Agentkernel-Storage-Mode"
	HeaderObjectClass     = "X-Agentkernel-Object-Class"
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
