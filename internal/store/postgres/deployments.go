package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

const (
	deploymentCols = `id, tenant_id, agent_id, doc, paused_reason, next_fire_at, last_run_at, archived_at,
	version, created_at, updated_at`
	deploymentRunCols = `id, tenant_id, deployment_id, agent, trigger_type, scheduled_at, session_id, error, created_at`
)

func scanDeployment(row pgx.Row) (*store.Deployment, error) {
	var (
		d           store.Deployment
		doc, paused []byte
	)
	if err := row.Scan(&d.ID, &d.TenantID, &d.AgentID, &doc, &paused, &d.NextFireAt, &d.LastRunAt, &d.ArchivedAt,
		&d.Version, &d.CreatedAt, &d.UpdatedAt); err != nil {
		return nil, err
	}
	d.Doc, d.PausedReason = rawOrNil(doc), rawOrNil(paused)
	d.NextFireAt, d.LastRunAt, d.ArchivedAt = utcPtr(d.NextFireAt), utcPtr(d.LastRunAt), utcPtr(d.ArchivedAt)
	d.CreatedAt, d.UpdatedAt = d.CreatedAt.UTC(), d.UpdatedAt.UTC()
	return &d, nil
}

func scanDeploymentRun(row pgx.Row) (*store.DeploymentRun, error) {
	var (
		x             store.DeploymentRun
		agent, errDoc []byte
	)
	if err := row.Scan(&x.ID, &x.TenantID, &x.DeploymentID, &agent, &x.Trigger, &x.ScheduledAt, &x.SessionID, &errDoc,
		&x.CreatedAt); err != nil {
		return nil, err
	}
	x.Agent, x.Error = rawOrNil(agent), rawOrNil(errDoc)
	x.ScheduledAt, x.CreatedAt = utcPtr(x.ScheduledAt), x.CreatedAt.UTC()
	return &x, nil
}

// CreateDeployment implements store.DeploymentStore.
func (s *Store) CreateDeployment(ctx context.Context, d *store.Deployment) (*store.Deployment, error) {
	in := *d
	if in.ID == "" {
		in.ID = ids.New("depl")
	}
	doc, err := objectArg("deployment "+in.ID+": Doc", in.Doc)
	if err != nil {
		return nil, err
	}
	paused, err := jsonArg("deployment "+in.ID+": PausedReason", in.PausedReason)
	if err != nil {
		return nil, err
	}
	now := s.clock()
	var out *store.Deployment
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		out, err = scanDeployment(tx.QueryRow(ctx, `INSERT INTO deployments (`+deploymentCols+`)
			VALUES ($1, $2, $3, $4, $5, $6, NULL, NULL, 1, $7, $7) RETURNING `+deploymentCols,
			in.ID, in.TenantID, in.AgentID, doc, paused, in.NextFireAt, now))
		if err != nil {
			if isUniqueViolation(err) {
				return fmt.Errorf("create deployment %s: %w", in.ID, store.ErrAlreadyExists)
			}
			return mapErr("create deployment "+in.ID, err)
		}
		return s.lifecycleWebhook(ctx, tx, out.TenantID, out.ID, store.WebhookDeploymentCreated, out.CreatedAt)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GetDeployment implements store.DeploymentStore.
func (s *Store) GetDeployment(ctx context.Context, id string) (*store.Deployment, error) {
	d, err := scanDeployment(s.pool.QueryRow(ctx, `SELECT `+deploymentCols+` FROM deployments WHERE id = $1`, id))
	if err != nil {
		return nil, mapErr("deployment "+id, err)
	}
	return d, nil
}

// PutDeployment implements store.DeploymentStore.
func (s *Store) PutDeployment(ctx context.Context, d *store.Deployment) (*store.Deployment, error) {
	doc, err := objectArg("deployment "+d.ID+": Doc", d.Doc)
	if err != nil {
		return nil, err
	}
	paused, err := jsonArg("deployment "+d.ID+": PausedReason", d.PausedReason)
	if err != nil {
		return nil, err
	}
	var out *store.Deployment
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		prev, err := scanDeployment(tx.QueryRow(ctx, `SELECT `+deploymentCols+` FROM deployments WHERE id = $1 FOR UPDATE`, d.ID))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("deployment %q: %w", d.ID, store.ErrNotFound)
		}
		if err != nil {
			return mapErr("read deployment "+d.ID, err)
		}
		row, err := scanDeployment(tx.QueryRow(ctx, `UPDATE deployments SET agent_id = $1, doc = $2,
			paused_reason = $3, next_fire_at = $4, archived_at = $5, version = version + 1, updated_at = $6
			WHERE id = $7 AND version = $8 RETURNING `+deploymentCols,
			d.AgentID, doc, paused, d.NextFireAt, d.ArchivedAt, s.clock(), d.ID, d.Version))
		if err == nil {
			out = row
			return s.lifecycleWebhook(ctx, tx, row.TenantID, row.ID, store.DeploymentChangeWebhook(prev, row), row.UpdatedAt)
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return mapErr("put deployment "+d.ID, err)
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM deployments WHERE id = $1`, d.ID).Scan(&n); err != nil {
			return mapErr("read deployment "+d.ID, err)
		}
		if n == 0 {
			return fmt.Errorf("deployment %q: %w", d.ID, store.ErrNotFound)
		}
		return fmt.Errorf("deployment %q changed since version %d: %w", d.ID, d.Version, store.ErrVersionMismatch)
	})
	return out, err
}

// ListDeployments implements store.DeploymentStore.
func (s *Store) ListDeployments(ctx context.Context, p store.ListDeploymentsParams) ([]*store.Deployment, error) {
	where, tail, page := resourcePage(p.ListResourcesParams, 5)
	rows, err := s.pool.Query(ctx, `SELECT `+deploymentCols+` FROM deployments
		WHERE tenant_id = $1 AND ($2 OR archived_at IS NULL) AND ($3::text = '' OR agent_id = $3)
		AND ($4::boolean IS NULL OR (paused_reason IS NOT NULL) = $4)`+where+tail,
		append([]any{p.TenantID, p.IncludeArchived, p.AgentID, p.Paused}, page...)...)
	if err != nil {
		return nil, mapErr("list deployments", err)
	}
	return collect(rows, "deployments", scanDeployment)
}

// DueDeployments implements store.DeploymentStore.
func (s *Store) DueDeployments(ctx context.Context, now time.Time, limit int) ([]*store.Deployment, error) {
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	rows, err := s.pool.Query(ctx, `SELECT `+deploymentCols+` FROM deployments
		WHERE next_fire_at IS NOT NULL AND next_fire_at <= $1 AND paused_reason IS NULL AND archived_at IS NULL
		ORDER BY next_fire_at, id LIMIT $2`, now, lim)
	if err != nil {
		return nil, mapErr("due deployments", err)
	}
	return collect(rows, "deployments", scanDeployment)
}

// ClaimDeploymentFire implements store.DeploymentStore.
func (s *Store) ClaimDeploymentFire(ctx context.Context, id string, fireAt time.Time, next *time.Time, run *store.DeploymentRun) (*store.DeploymentRun, error) {
	var out *store.DeploymentRun
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		r := *run
		if r.CreatedAt.IsZero() {
			r.CreatedAt = s.clock()
		}
		tag, err := tx.Exec(ctx, `UPDATE deployments SET next_fire_at = $1, last_run_at = $2, version = version + 1
			WHERE id = $3 AND next_fire_at = $4 AND paused_reason IS NULL AND archived_at IS NULL`,
			next, r.CreatedAt, id, fireAt)
		if err != nil {
			return mapErr("claim deployment "+id, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("deployment %q: fire at %s is no longer due: %w", id, fireAt, store.ErrConflict)
		}
		out, err = s.insertDeploymentRun(ctx, tx, &r)
		return err
	})
	return out, err
}

// InsertDeploymentRun implements store.DeploymentStore.
func (s *Store) InsertDeploymentRun(ctx context.Context, run *store.DeploymentRun) (*store.DeploymentRun, error) {
	r := *run
	if r.CreatedAt.IsZero() {
		r.CreatedAt = s.clock()
	}
	var out *store.DeploymentRun
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = s.insertDeploymentRun(ctx, tx, &r)
		return err
	})
	return out, err
}

// insertDeploymentRun inserts the run and announces it (started) in the
// caller's transaction.
func (s *Store) insertDeploymentRun(ctx context.Context, tx pgx.Tx, r *store.DeploymentRun) (*store.DeploymentRun, error) {
	if r.ID == "" {
		r.ID = ids.New("drun")
	}
	agent, err := objectArg("deployment run "+r.ID+": Agent", r.Agent)
	if err != nil {
		return nil, err
	}
	out, err := scanDeploymentRun(tx.QueryRow(ctx, `INSERT INTO deployment_runs (`+deploymentRunCols+`)
		VALUES ($1, $2, $3, $4, $5, $6, '', NULL, $7) RETURNING `+deploymentRunCols,
		r.ID, r.TenantID, r.DeploymentID, agent, r.Trigger, r.ScheduledAt, r.CreatedAt))
	if err != nil {
		if isUniqueViolation(err) {
			return nil, fmt.Errorf("deployment run %s: %w", r.ID, store.ErrAlreadyExists)
		}
		return nil, mapErr("insert deployment run "+r.ID, err)
	}
	if err := s.enqueueWebhooks(ctx, tx, out.TenantID, out.DeploymentID, []webhookEvent{
		{typ: store.WebhookDeploymentRunStarted, resource: out.ID, at: out.CreatedAt}}); err != nil {
		return nil, err
	}
	return out, nil
}

// StartDeploymentRun implements store.DeploymentStore.
func (s *Store) StartDeploymentRun(ctx context.Context, id, sessionID string, errDoc json.RawMessage) (*store.DeploymentRun, error) {
	e, err := jsonArg("deployment run "+id+": Error", errDoc)
	if err != nil {
		return nil, err
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		var tenant, depl string
		err := tx.QueryRow(ctx, `UPDATE deployment_runs SET session_id = $1, error = $2
			WHERE id = $3 AND session_id = '' AND error IS NULL RETURNING tenant_id, deployment_id`, sessionID, e, id).Scan(&tenant, &depl)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // started before: announced then
		}
		if err != nil {
			return mapErr("start deployment run "+id, err)
		}
		return s.enqueueWebhooks(ctx, tx, tenant, depl, []webhookEvent{
			{typ: store.DeploymentRunWebhook(e != nil), resource: id, at: s.clock()}})
	})
	if err != nil {
		return nil, err
	}
	return s.GetDeploymentRun(ctx, id)
}

// GetDeploymentRun implements store.DeploymentStore.
func (s *Store) GetDeploymentRun(ctx context.Context, id string) (*store.DeploymentRun, error) {
	r, err := scanDeploymentRun(s.pool.QueryRow(ctx, `SELECT `+deploymentRunCols+` FROM deployment_runs WHERE id = $1`, id))
	if err != nil {
		return nil, mapErr("deployment run "+id, err)
	}
	return r, nil
}

// ListDeploymentRuns implements store.DeploymentStore.
func (s *Store) ListDeploymentRuns(ctx context.Context, p store.ListDeploymentRunsParams) ([]*store.DeploymentRun, error) {
	where, tail, page := resourcePage(store.ListResourcesParams{AfterID: p.AfterID, BeforeID: p.BeforeID, Limit: p.Limit,
		Descending: p.Descending}, 5)
	rows, err := s.pool.Query(ctx, `SELECT `+deploymentRunCols+` FROM deployment_runs
		WHERE tenant_id = $1 AND (session_id <> '' OR error IS NOT NULL) AND ($2::text = '' OR deployment_id = $2)
		AND ($3::text = '' OR trigger_type = $3) AND ($4::boolean IS NULL OR (error IS NOT NULL) = $4)`+where+tail,
		append([]any{p.TenantID, p.DeploymentID, p.Trigger, p.HasError}, page...)...)
	if err != nil {
		return nil, mapErr("list deployment runs", err)
	}
	return collect(rows, "deployment runs", scanDeploymentRun)
}

// UnstartedDeploymentRuns implements store.DeploymentStore.
func (s *Store) UnstartedDeploymentRuns(ctx context.Context) ([]*store.DeploymentRun, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+deploymentRunCols+` FROM deployment_runs
		WHERE session_id = '' AND error IS NULL ORDER BY id`)
	if err != nil {
		return nil, mapErr("unstarted deployment runs", err)
	}
	return collect(rows, "deployment runs", scanDeploymentRun)
}

var _ store.DeploymentStore = (*Store)(nil)
