// Package store defines agentkernel's one storage interface. Engines live in
// sub-packages (sqlite, postgres) and pass the one contract suite in
// storetest. Every multi-row change the seeds call atomic is one transaction
// inside the engine; there is no non-atomic fallback.
package store

import (
	"context"
	"io"
)

// Store is everything the daemon persists. Later capabilities (sandboxes,
// objects, alarms, events, op journal, monitor) add their own sub-interfaces
// here.
type Store interface {
	SessionStore
	TenantStore
	SandboxStore
	ObjectStore
	ManagedStore
	OpStore
	MonitorStore
	BlobRefStore
	VaultStore
	FileStore
	MemoryStores
	SkillStore
	PackageBuildStore
	SessionResourceStore
	DeploymentStore
	WebhookStore
	WorkStore
	LeaseStore
	io.Closer

	// Engine names the engine ("sqlite", "postgres") for logs and metrics.
	Engine() string
	// Ping checks that the store answers.
	Ping(ctx context.Context) error
}
