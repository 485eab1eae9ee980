package managed

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// deploymentDoc is a deployment's stored body: the recipe of the sessions
// its runs create (issue 14). The agent is pinned to a version.
type deploymentDoc struct {
	Agent         pinnedAgent       `json:"agent"`
	EnvironmentID string            `json:"environment_id"`
	InitialEvents json.RawMessage   `json:"initial_events"`
	Name          string            `json:"name"`
	Description   string            `json:"description"`
	Metadata      map[string]string `json:"metadata"`
	Resources     json.RawMessage   `json:"resources,omitempty"`
	VaultIDs      []string          `json:"vault_ids,omitempty"`
	Schedule      *scheduleDoc      `json:"schedule,omitempty"`
}

type pinnedAgent struct {
	ID      string `json:"id"`
	Version int64  `json:"version"`
}

func (a pinnedAgent) ref() map[string]any {
	return map[string]any{"type": "agent", "id": a.ID, "version": a.Version}
}

type scheduleDoc struct {
	Expression string `json:"expression"`
	Timezone   string `json:"timezone"`
}

const (
	maxDeploymentName        = 256
	maxDeploymentDescription = 2048
	maxDeploymentVaults      = 50
)

var manualPause = json.RawMessage(`{"type":"manual"}`)

func decodeDeploymentDoc(b []byte) (deploymentDoc, error) {
	var d deploymentDoc
	if err := json.Unmarshal(b, &d); err != nil {
		return d, fmt.Errorf("stored deployment doc: %w", err)
	}
	return d, nil
}

// sessionBody is the POST /v1/sessions body a run of d creates its
// session with, the agent pinned to agent.
func (d deploymentDoc) sessionBody(agent pinnedAgent) (Obj, error) {
	m := map[string]any{"agent": agent.ref(), "environment_id": d.EnvironmentID, "initial_events": d.InitialEvents}
	if len(d.Resources) > 0 {
		m["resources"] = d.Resources
	}
	if len(d.VaultIDs) > 0 {
		m["vault_ids"] = d.VaultIDs
	}
	return ParseBody(MustJSON(m))
}

// parsedSchedule is d's schedule, nil without one.
func (d deploymentDoc) parsedSchedule() (*schedule, error) {
	if d.Schedule == nil {
		return nil, nil
	}
	return parseSchedule("schedule", d.Schedule.Expression, d.Schedule.Timezone)
}

// nextFire is when row's schedule fires next after now: nil without a
// schedule, or while paused or archived.
func nextFire(row *store.Deployment, d deploymentDoc, now time.Time) (*time.Time, error) {
	if row.PausedReason != nil || row.ArchivedAt != nil {
		return nil, nil
	}
	sc, err := d.parsedSchedule()
	if sc == nil || err != nil {
		return nil, err
	}
	t := sc.next(now)
	return &t, nil
}

// deploymentJSON renders the SDK's BetaManagedAgentsDeployment.
func deploymentJSON(row *store.Deployment, d deploymentDoc, now time.Time) map[string]any {
	status := "active"
	var paused any
	if row.PausedReason != nil {
		status, paused = "paused", row.PausedReason
	}
	var sched any
	if d.Schedule != nil {
		upcoming := []time.Time{}
		if sc, err := d.parsedSchedule(); err == nil && row.ArchivedAt == nil {
			upcoming = sc.upcoming(now, maxUpcomingRuns)
		}
		sched = map[string]any{"type": "cron", "expression": d.Schedule.Expression, "timezone": d.Schedule.Timezone,
			"last_run_at": row.LastRunAt, "upcoming_runs_at": upcoming}
	}
	vaults := d.VaultIDs
	if vaults == nil {
		vaults = []string{}
	}
	return map[string]any{
		"id": row.ID, "type": "deployment", "agent": d.Agent.ref(), "environment_id": d.EnvironmentID,
		"initial_events": orEmptyArray(d.InitialEvents), "name": d.Name, "description": d.Description,
		"metadata": orEmptyMap(d.Metadata), "resources": orEmptyArray(d.Resources), "vault_ids": vaults,
		"schedule": sched, "status": status, "paused_reason": paused, "budget": nil,
		"archived_at": row.ArchivedAt, "created_at": row.CreatedAt.UTC(), "updated_at": row.UpdatedAt.UTC(),
	}
}

// deploymentRunJSON renders the SDK's BetaManagedAgentsDeploymentRun.
func deploymentRunJSON(r *store.DeploymentRun) map[string]any {
	var agent pinnedAgent
	_ = json.Unmarshal(r.Agent, &agent)
	trigger := map[string]any{"type": r.Trigger}
	if r.Trigger == store.TriggerSchedule && r.ScheduledAt != nil {
		trigger["scheduled_at"] = r.ScheduledAt.UTC()
	}
	var errDoc any
	if len(r.Error) > 0 {
		errDoc = r.Error
	}
	return map[string]any{
		"id": r.ID, "type": "deployment_run", "agent": agent.ref(), "deployment_id": r.DeploymentID,
		"session_id": nilIfEmpty(r.SessionID), "error": errDoc, "trigger_context": trigger,
		"created_at": r.CreatedAt.UTC(),
	}
}
