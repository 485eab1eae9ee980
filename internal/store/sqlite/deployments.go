package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

const (
	deploymentCols = `id, tenant_id, agent_id, doc, paused_reason, next_fire_at, last_run_at, archived_at,
	version, created_at, updated_at`
	deploymentRunCols = `id, tenant_id, deployment_id, agent, trigger_type, scheduled_at, session_id, error, created_at`
)

func scanDeployment(r scanner) (*store.Deployment, error) {
	var (
		d                    store.Deployment
		doc                  string
		paused               sql.NullString
		next, last, archived sql.NullInt64
		created, updated     int64
	)
	if err := r.Scan(&d.ID, &d.TenantID, &d.AgentID, &doc, &paused, &next, &last, &archived, &d.Version,
		&created, &updated); err != nil {
		return nil, err
	}
	d.Doc, d.PausedReason = json.RawMessage(doc), rawOrNil(paused)
	d.NextFireAt, d.LastRunAt, d.ArchivedAt = timePtr(next), timePtr(last), timePtr(archived)
	d.CreatedAt, d.UpdatedAt = fromMicros(created), fromMicros(updated)
	return &d, nil
}

func scanDeploymentRun(r scanner) (*store.DeploymentRun, error) {
	var (
		x         store.DeploymentRun
		agent     string
		errDoc    sql.NullString
		scheduled sql.NullInt64
		created   int64
	)
	if err := r.Scan(&x.ID, &x.TenantID, &x.DeploymentID, &agent, &x.Trigger, &scheduled, &x.SessionID, &errDoc,
		&created); err != nil {
		return nil, err
	}
	x.Agent, x.Error, x.ScheduledAt, x.CreatedAt = json.RawMessage(agent), rawOrNil(errDoc), timePtr(scheduled), fromMicros(created)
	return &x, nil
}

// CreateDeployment implements store.DeploymentStore.
func (s *Store) CreateDeployment(ctx context.Context, d *store.Deployment) (*store.Deployment, error) {
	in := *d
	if in.ID == "" {
		in.ID = ids.New("depl")
	}
	doc, err := jsonObject("deployment "+in.ID+": Doc", in.Doc, "{}")
	if err != nil {
		return nil, err
	}
	paused, err := jsonValue("deployment "+in.ID+": PausedReason", in.PausedReason)
	if err != nil {
		return nil, err
	}
	now := s.timestamp()
	var out *store.Deployment
	err = s.inTx(ctx, func(tx *wtx) error {
		out, err = scanDeployment(tx.QueryRowContext(ctx, `INSERT INTO deployments (`+deploymentCols+`)
			VALUES (?, ?, ?, ?, ?, ?, NULL, NULL, 1, ?, ?) ON CONFLICT DO NOTHING RETURNING `+deploymentCols,
			in.ID, in.TenantID, in.AgentID, doc, paused, nullMicros(in.NextFireAt), micros(now), micros(now)))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("deployment %q: %w", in.ID, store.ErrAlreadyExists)
		}
		if err != nil {
			return fmt.Errorf("sqlite: create deployment %q: %w", in.ID, err)
		}
		return s.lifecycleWebhookTx(ctx, tx, out.TenantID, out.ID, store.WebhookDeploymentCreated, out.CreatedAt)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GetDeployment implements store.DeploymentStore.
func (s *Store) GetDeployment(ctx context.Context, id string) (*store.Deployment, error) {
	d, err := scanDeployment(s.read.QueryRowContext(ctx, `SELECT `+deploymentCols+` FROM deployments WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("deployment %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get deployment %q: %w", id, err)
	}
	return d, nil
}

// PutDeployment implements store.DeploymentStore.
func (s *Store) PutDeployment(ctx context.Context, d *store.Deployment) (*store.Deployment, error) {
	doc, err := jsonObject("deployment "+d.ID+": Doc", d.Doc, "{}")
	if err != nil {
		return nil, err
	}
	paused, err := jsonValue("deployment "+d.ID+": PausedReason", d.PausedReason)
	if err != nil {
		return nil, err
	}
	var out *store.Deployment
	err = s.inTx(ctx, func(tx *wtx) error {
		prev, err := scanDeployment(tx.QueryRowContext(ctx, `SELECT `+deploymentCols+` FROM deployments WHERE id = ?`, d.ID))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("deployment %q: %w", d.ID, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("sqlite: read deployment %q: %w", d.ID, err)
		}
		row, err := scanDeployment(tx.QueryRowContext(ctx, `UPDATE deployments SET agent_id = ?, doc = ?,
			paused_reason = ?, next_fire_at = ?, archived_at = ?, version = version + 1, updated_at = ?
			WHERE id = ? AND version = ? RETURNING `+deploymentCols,
			d.AgentID, doc, paused, nullMicros(d.NextFireAt), nullMicros(d.ArchivedAt), micros(s.timestamp()), d.ID, d.Version))
		if err == nil {
			out = row
			return s.lifecycleWebhookTx(ctx, tx, row.TenantID, row.ID, store.DeploymentChangeWebhook(prev, row), row.UpdatedAt)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlite: put deployment %q: %w", d.ID, err)
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM deployments WHERE id = ?`, d.ID).Scan(&n); err != nil {
			return fmt.Errorf("sqlite: read deployment %q: %w", d.ID, err)
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
	paused := -1
	if p.Paused != nil {
		paused = 0
		if *p.Paused {
			paused = 1
		}
	}
	where, tail, page := resourcePage(p.ListResourcesParams, 5)
	rows, err := s.read.QueryContext(ctx, `SELECT `+deploymentCols+` FROM deployments
		WHERE tenant_id = ?1 AND (?2 OR archived_at IS NULL) AND (?3 = '' OR agent_id = ?3)
		AND (?4 < 0 OR (paused_reason IS NOT NULL) = (?4 = 1))`+where+tail,
		append([]any{p.TenantID, p.IncludeArchived, p.AgentID, paused}, page...)...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list deployments: %w", err)
	}
	return collect(rows, "deployments", scanDeployment)
}

// DueDeployments implements store.DeploymentStore.
func (s *Store) DueDeployments(ctx context.Context, now time.Time, limit int) ([]*store.Deployment, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := s.read.QueryContext(ctx, `SELECT `+deploymentCols+` FROM deployments
		WHERE next_fire_at IS NOT NULL AND next_fire_at <= ? AND paused_reason IS NULL AND archived_at IS NULL
		ORDER BY next_fire_at, id LIMIT ?`, micros(now), limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: due deployments: %w", err)
	}
	return collect(rows, "deployments", scanDeployment)
}

// ClaimDeploymentFire implements store.DeploymentStore.
func (s *Store) ClaimDeploymentFire(ctx context.Context, id string, fireAt time.Time, next *time.Time, run *store.DeploymentRun) (*store.DeploymentRun, error) {
	var out *store.DeploymentRun
	err := s.inTx(ctx, func(tx *wtx) error {
		r := *run
		if r.CreatedAt.IsZero() {
			r.CreatedAt = s.timestamp()
		}
		res, err := tx.ExecContext(ctx, `UPDATE deployments SET next_fire_at = ?, last_run_at = ?, version = version + 1
			WHERE id = ? AND next_fire_at = ? AND paused_reason IS NULL AND archived_at IS NULL`,
			nullMicros(next), micros(r.CreatedAt), id, micros(fireAt))
		if err != nil {
			return fmt.Errorf("sqlite: claim deployment %q: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
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
		r.CreatedAt = s.timestamp()
	}
	var out *store.DeploymentRun
	err := s.inTx(ctx, func(tx *wtx) error {
		var err error
		out, err = s.insertDeploymentRun(ctx, tx, &r)
		return err
	})
	return out, err
}

// insertDeploymentRun inserts the run and announces it (started) in the
// caller's transaction.
func (s *Store) insertDeploymentRun(ctx context.Context, tx *wtx, r *store.DeploymentRun) (*store.DeploymentRun, error) {
	if r.ID == "" {
		r.ID = ids.New("drun")
	}
	agent, err := jsonObject("deployment run "+r.ID+": Agent", r.Agent, "{}")
	if err != nil {
		return nil, err
	}
	out, err := scanDeploymentRun(tx.QueryRowContext(ctx, `INSERT INTO deployment_runs (`+deploymentRunCols+`)
		VALUES (?, ?, ?, ?, ?, ?, '', NULL, ?) ON CONFLICT DO NOTHING RETURNING `+deploymentRunCols,
		r.ID, r.TenantID, r.DeploymentID, agent, r.Trigger, nullMicros(r.ScheduledAt), micros(r.CreatedAt)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("deployment run %q: %w", r.ID, store.ErrAlreadyExists)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: insert deployment run %q: %w", r.ID, err)
	}
	if err := s.enqueueWebhooksTx(ctx, tx, out.TenantID, out.DeploymentID, []webhookEvent{
		{typ: store.WebhookDeploymentRunStarted, resource: out.ID, at: out.CreatedAt}}); err != nil {
		return nil, err
	}
	return out, nil
}

// StartDeploymentRun implements store.DeploymentStore.
func (s *Store) StartDeploymentRun(ctx context.Context, id, sessionID string, errDoc json.RawMessage) (*store.DeploymentRun, error) {
	e, err := jsonValue("deployment run "+id+": Error", errDoc)
	if err != nil {
		return nil, err
	}
	err = s.inTx(ctx, func(tx *wtx) error {
		var tenant, depl string
		err := tx.QueryRowContext(ctx, `UPDATE deployment_runs SET session_id = ?, error = ?
			WHERE id = ? AND session_id = '' AND error IS NULL RETURNING tenant_id, deployment_id`, sessionID, e, id).Scan(&tenant, &depl)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // started before: announced then
		}
		if err != nil {
			return fmt.Errorf("sqlite: start deployment run %q: %w", id, err)
		}
		return s.enqueueWebhooksTx(ctx, tx, tenant, depl, []webhookEvent{
			{typ: store.DeploymentRunWebhook(e.Valid), resource: id, at: s.timestamp()}})
	})
	if err != nil {
		return nil, err
	}
	return s.GetDeploymentRun(ctx, id)
}

// GetDeploymentRun implements store.DeploymentStore.
func (s *Store) GetDeploymentRun(ctx context.Context, id string) (*store.DeploymentRun, error) {
	r, err := scanDeploymentRun(s.read.QueryRowContext(ctx, `SELECT `+deploymentRunCols+` FROM deployment_runs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("deployment run %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get deployment run %q: %w", id, err)
	}
	return r, nil
}

// ListDeploymentRuns implements store.DeploymentStore.
func (s *Store) ListDeploymentRuns(ctx context.Context, p store.ListDeploymentRunsParams) ([]*store.DeploymentRun, error) {
	hasErr := -1
	if p.HasError != nil {
		hasErr = 0
		if *p.HasError {
			hasErr = 1
		}
	}
	where, tail, page := resourcePage(store.ListResourcesParams{AfterID: p.AfterID, BeforeID: p.BeforeID, Limit: p.Limit,
		Descending: p.Descending}, 5)
	rows, err := s.read.QueryContext(ctx, `SELECT `+deploymentRunCols+` FROM deployment_runs
		WHERE tenant_id = ?1 AND (session_id <> '' OR error IS NOT NULL) AND (?2 = '' OR deployment_id = ?2)
		AND (?3 = '' OR trigger_type = ?3) AND (?4 < 0 OR (error IS NOT NULL) = (?4 = 1))`+where+tail,
		append([]any{p.TenantID, p.DeploymentID, p.Trigger, hasErr}, page...)...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list deployment runs: %w", err)
	}
	return collect(rows, "deployment runs", scanDeploymentRun)
}

// UnstartedDeploymentRuns implements store.DeploymentStore.
func (s *Store) UnstartedDeploymentRuns(ctx context.Context) ([]*store.DeploymentRun, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+deploymentRunCols+` FROM deployment_runs
		WHERE session_id = '' AND error IS NULL ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: unstarted deployment runs: %w", err)
	}
	return collect(rows, "deployment runs", scanDeploymentRun)
}

var _ store.DeploymentStore = (*Store)(nil)
