package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// CreateTask implements store.MonitorStore.
func (s *Store) CreateTask(ctx context.Context, t *store.Task) (*store.Task, error) {
	var out *store.Task
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = s.createTaskTx(ctx, tx, t)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// createTaskTx validates and inserts a task within tx (CreateTask and the
// diagnostic claim share it).
func (s *Store) createTaskTx(ctx context.Context, tx pgx.Tx, t *store.Task) (*store.Task, error) {
	in := *t
	if in.ID == "" {
		in.ID = ids.New("tsk")
	}
	if err := store.CheckTask(&in); err != nil {
		return nil, err
	}
	if in.TicketID != "" {
		if err := ticketExists(ctx, tx, in.TicketID); err != nil {
			return nil, fmt.Errorf("task %s: %w", in.ID, err)
		}
	}
	result, err := jsonArg("task "+in.ID+": result", in.Result)
	if err != nil {
		return nil, err
	}
	in.CreatedAt = orNow(in.CreatedAt, s.clock())
	out, err := scanTask(tx.QueryRow(ctx, `INSERT INTO agent_tasks
		(id, tenant_id, ticket_id, kind, command, env, sandbox_spec, sandbox_id, process_id, transcript_path,
		 status, failure_reason, result, diagnostic_of, version, created_at, updated_at, started_at, finished_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, 1, $15, $15, $16, $17)
		ON CONFLICT (id) DO NOTHING RETURNING `+taskCols,
		in.ID, in.TenantID, in.TicketID, in.Kind, string(in.Command), string(in.Env), string(in.SandboxSpec),
		in.SandboxID, in.ProcessID, in.TranscriptPath, in.Status, in.FailureReason, result, in.DiagnosticOf,
		in.CreatedAt, in.StartedAt, in.FinishedAt))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("task %q: %w", in.ID, store.ErrAlreadyExists)
	}
	if err != nil {
		return nil, mapErr("create task "+in.ID, err)
	}
	return out, nil
}

// GetTask implements store.MonitorStore.
func (s *Store) GetTask(ctx context.Context, id string) (*store.Task, error) {
	t, err := scanTask(s.pool.QueryRow(ctx, `SELECT `+taskCols+` FROM agent_tasks WHERE id = $1`, id))
	if err != nil {
		return nil, mapErr("get task "+id, err)
	}
	return t, nil
}

// ListTasks implements store.MonitorStore in id (creation) order.
func (s *Store) ListTasks(ctx context.Context, p store.ListTasksParams) ([]*store.Task, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+taskCols+` FROM agent_tasks
		WHERE ($1 = '' OR tenant_id = $1) AND ($2 = '' OR ticket_id = $2) AND ($3 = '' OR sandbox_id = $3)
		  AND ($4 = '' OR kind = $4) AND id > $5 AND ($6::text[] IS NULL OR status = ANY($6))
		ORDER BY id LIMIT $7`, p.TenantID, p.TicketID, p.SandboxID, string(p.Kind), p.AfterID,
		statusArgs(p.Statuses), limitArg(p.Limit))
	if err != nil {
		return nil, mapErr("list tasks", err)
	}
	return collect(rows, "tasks", scanTask)
}

// TransitionTask implements store.MonitorStore as one conditional UPDATE.
// Under READ COMMITTED a writer that waited on the row lock re-checks the
// WHERE against the committed row, so of racing writers with the same
// From exactly one matches, and a task that already left From (say,
// completed) is never overwritten.
func (s *Store) TransitionTask(ctx context.Context, p store.TransitionTaskParams) (store.TaskTransition, error) {
	if err := p.Check(); err != nil {
		return store.TaskTransition{}, err
	}
	result, err := jsonArg("task "+p.ID+": result", p.Patch.Result)
	if err != nil {
		return store.TaskTransition{}, err
	}
	at := orNow(p.At, s.clock())
	var out store.TaskTransition
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		t, err := scanTask(tx.QueryRow(ctx, `UPDATE agent_tasks SET status = $1,
			sandbox_id = COALESCE($2, sandbox_id), process_id = COALESCE($3, process_id),
			transcript_path = COALESCE($4, transcript_path), failure_reason = COALESCE($5, failure_reason),
			result = COALESCE($6::json, result), version = version + 1, updated_at = $7,
			started_at = CASE WHEN $8 AND started_at IS NULL THEN $7 ELSE started_at END,
			finished_at = CASE WHEN $9 THEN $7 ELSE finished_at END
			WHERE id = $10 AND status = ANY($11) RETURNING `+taskCols,
			p.To, p.Patch.SandboxID, p.Patch.ProcessID, p.Patch.TranscriptPath, p.Patch.FailureReason, result,
			at, p.To == store.TaskRunning, p.To.Terminal(), p.ID, statusArgs(p.From)))
		if err == nil {
			out = store.TaskTransition{OK: true, Task: t}
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return mapErr("transition task "+p.ID, err)
		}
		t, err = scanTask(tx.QueryRow(ctx, `SELECT `+taskCols+` FROM agent_tasks WHERE id = $1`, p.ID))
		if err != nil {
			return mapErr("task "+p.ID, err)
		}
		out = store.TaskTransition{Task: t}
		return nil
	})
	if err != nil {
		return store.TaskTransition{}, err
	}
	return out, nil
}
