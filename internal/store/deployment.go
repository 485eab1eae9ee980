package store

import (
	"context"
	"encoding/json"
	"time"
)

// Deployment is a stored session recipe (agent, environment, initial
// events, …) with an optional cron schedule (issue 14). The API owns Doc's
// shape; the store owns identity, the schedule's next fire and the claim.
type Deployment struct {
	ID       string
	TenantID string
	// AgentID is the deployed agent (list filter).
	AgentID string
	Doc     json.RawMessage
	// PausedReason is the JSON of why the deployment is paused; nil when
	// it is not.
	PausedReason json.RawMessage
	// NextFireAt is the schedule's pending fire: nil without a schedule,
	// or while paused or archived.
	NextFireAt *time.Time
	// LastRunAt is when the latest scheduled run was claimed.
	LastRunAt  *time.Time
	ArchivedAt *time.Time
	// Version increases with every write (PutDeployment and a claim), so
	// an update computed from a stale read never undoes a claim.
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Deployment run trigger types.
const (
	TriggerSchedule = "schedule"
	TriggerManual   = "manual"
)

// DeploymentRun is one fire of a deployment. It is claimed first (no
// SessionID, no Error) and started after: exactly one of the two is set
// once it started.
type DeploymentRun struct {
	ID           string
	TenantID     string
	DeploymentID string
	// Agent is the JSON of the agent reference at fire time.
	Agent       json.RawMessage
	Trigger     string
	ScheduledAt *time.Time
	SessionID   string
	Error       json.RawMessage
	CreatedAt   time.Time
}

// Started reports whether the run has its session or its error.
func (r *DeploymentRun) Started() bool { return r.SessionID != "" || len(r.Error) > 0 }

// ListDeploymentsParams pages through a tenant's deployments by id.
type ListDeploymentsParams struct {
	ListResourcesParams
	// Paused filters by status when set (true: paused only).
	Paused *bool
}

// ListDeploymentRunsParams pages through a tenant's started runs by id.
type ListDeploymentRunsParams struct {
	TenantID     string
	DeploymentID string
	Trigger      string
	// HasError filters runs that failed (true) or have a session (false).
	HasError   *bool
	AfterID    string
	BeforeID   string
	Limit      int
	Descending bool
}

// DeploymentStore holds deployments and their runs.
type DeploymentStore interface {
	// CreateDeployment inserts d (Version becomes 1).
	CreateDeployment(ctx context.Context, d *Deployment) (*Deployment, error)
	GetDeployment(ctx context.Context, id string) (*Deployment, error)
	// PutDeployment writes Doc, AgentID, PausedReason, NextFireAt and
	// ArchivedAt if the stored Version equals d.Version (else
	// ErrVersionMismatch, nothing written); Version+1, UpdatedAt now.
	PutDeployment(ctx context.Context, d *Deployment) (*Deployment, error)
	ListDeployments(ctx context.Context, p ListDeploymentsParams) ([]*Deployment, error)
	// DueDeployments lists the deployments whose NextFireAt <= now, oldest
	// fire first (limit <= 0: no limit).
	DueDeployments(ctx context.Context, now time.Time, limit int) ([]*Deployment, error)
	// ClaimDeploymentFire claims the fire at fireAt in one transaction: if
	// the deployment's NextFireAt still equals fireAt (not paused, not
	// archived) it becomes next, LastRunAt becomes the run's CreatedAt and
	// run is inserted; otherwise ErrConflict and nothing is written.
	ClaimDeploymentFire(ctx context.Context, id string, fireAt time.Time, next *time.Time, run *DeploymentRun) (*DeploymentRun, error)
	// InsertDeploymentRun inserts an unstarted run (a manual one).
	InsertDeploymentRun(ctx context.Context, run *DeploymentRun) (*DeploymentRun, error)
	// StartDeploymentRun records the run's session or error. A run that
	// already started keeps what it has (the first start wins) and is
	// returned as stored.
	StartDeploymentRun(ctx context.Context, id, sessionID string, errDoc json.RawMessage) (*DeploymentRun, error)
	GetDeploymentRun(ctx context.Context, id string) (*DeploymentRun, error)
	// ListDeploymentRuns lists started runs.
	ListDeploymentRuns(ctx context.Context, p ListDeploymentRunsParams) ([]*DeploymentRun, error)
	// UnstartedDeploymentRuns lists claimed runs that have neither a
	// session nor an error (recovery starts them), by id.
	UnstartedDeploymentRuns(ctx context.Context) ([]*DeploymentRun, error)
}
