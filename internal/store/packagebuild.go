package store

import (
	"context"
	"time"
)

// PackageBuild is one build of an environment's config.packages: the
// layer every sandbox of the environment starts from. A build is known by
// its Key, a hash of what goes into it (the package lists, the driver and
// the base image), so an environment whose packages do not change is
// built once, and a change is a new build beside the old one.
type PackageBuild struct {
	TenantID string
	Key      string
	// EnvironmentID is the environment that asked for the build first.
	EnvironmentID string
	// Status is building, ready or failed.
	Status string
	// Progress says which step runs, e.g. "pip 1/2".
	Progress string
	// Package names the package whose install failed (failed only).
	Package string
	// LogTail is the end of the failing step's output (failed only).
	LogTail string
	// SandboxID is the build sandbox while it runs: the egress proxy lets
	// only it reach the package registries.
	SandboxID string
	// Version counts writes; UpdatePackageBuild compares it.
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Package build states.
const (
	BuildBuilding = "building"
	BuildReady    = "ready"
	BuildFailed   = "failed"
)

// PackageBuildStore holds package builds. Tenancy is part of the key.
type PackageBuildStore interface {
	// CreatePackageBuild inserts b (Version 1); one with its tenant and key
	// already there → ErrAlreadyExists, so exactly one caller builds it.
	CreatePackageBuild(ctx context.Context, b *PackageBuild) (*PackageBuild, error)
	GetPackageBuild(ctx context.Context, tenantID, key string) (*PackageBuild, error)
	// UpdatePackageBuild writes b's state if b.Version is the stored one
	// (else ErrConflict) and returns the row with Version+1.
	UpdatePackageBuild(ctx context.Context, b *PackageBuild) (*PackageBuild, error)
}
