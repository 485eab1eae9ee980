package session

import "github.com/agentkernel/agentkernel/internal/store"

// Session statuses, as the Managed Agents API names them
// (anthropic.BetaManagedAgentsSessionStatus).
const (
	StatusIdle         = "idle"
	StatusRunning      = "running"
	StatusRescheduling = "rescheduling"
	StatusTerminated   = "terminated"
)

// DeriveStatus is the one place a session's status comes from (seed 000):
// it is read off durable facts, never stored, so no write can leave it
// saying "running" without a turn that owns the run row.
func DeriveStatus(s *store.ManagedSession, rr *store.RunRow) string {
	switch {
	case s != nil && s.TerminatedAt != nil:
		return StatusTerminated
	case rr != nil && rr.Recovering:
		return StatusRescheduling
	case rr != nil:
		return StatusRunning
	}
	return StatusIdle
}
