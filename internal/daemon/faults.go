//go:build !failpoints

package daemon

import (
	"github.com/agentkernel/agentkernel/internal/blob"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store/sqlite"
)

// sandboxFaults is nil in production builds; crash tests build with
// -tags failpoints to inject a hang at a chosen point.
func sandboxFaults(string) *sandbox.Faults { return nil }

// sandboxBlobs is the blob store itself in production builds.
func sandboxBlobs(_ string, b blob.Store) blob.Store { return b }

// fileFaults is nil in production builds (files.Config.BeforeRecord).
func fileFaults(string) func(key string) { return nil }

// sqliteFaults adds no store options in production builds.
func sqliteFaults(string) []sqlite.Option { return nil }

// deploymentFaults is nil in production builds (the deployment
// scheduler's AfterClaim).
func deploymentFaults(string) func(runID string) { return nil }
