package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// CreateTask implements store.MonitorStore.
func (s *Store) CreateTask(ctx context.Context, t *store.Task) (*store.Task, error) {
	var out *store.Task
	err := s.inTx(ctx, func(tx *wtx) error {
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
func (s *Store) createTaskTx(ctx context.Context, tx *wtx, t *store.Task) (*store.Task, error) {
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
	result, err := jsonValue("task "+in.ID+": result", in.Result)
	if err != nil {
		return nil, err
	}
	in.CreatedAt = orNow(in.CreatedAt, s.timestamp())
	out, err := scanTask(tx.QueryRowContext(ctx, `INSERT INTO agent_tasks
		(id, tenant_id, ticket_id, kind, command, env, sandbox_spec, sandbox_id, process_id, transcript_path,
		 status, failure_reason, result, diagnostic_of, version, created_at, updated_at, started_at, finished_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?)
		ON CONFLICT (id) DO NOTHING RETURNING `+taskCols,
		in.ID, in.TenantID, in.TicketID, in.Kind, string(in.Command), string(in.Env), string(in.SandboxSpec),
		in.SandboxID, in.ProcessID, in.TranscriptPath, in.Status, in.FailureReason, result, in.DiagnosticOf,
		micros(in.CreatedAt), micros(in.CreatedAt), nullMicros(in.StartedAt), nullMicros(in.FinishedAt)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("task %q: %w", in.ID, store.ErrAlreadyExists)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: create task %q: %w", in.ID, err)
	}
	return out, nil
}

// GetTask implements store.MonitorStore.
func (s *Store) GetTask(ctx context.Context, id string) (*store.Task, error) {
	t, err := scanTask(s.read.QueryRowContext(ctx, `SELECT `+taskCols+` FROM agent_tasks WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("task %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get task %q: %w", id, err)
	}
	return t, nil
}

// ListTasks implements store.MonitorStore in id (creation) order.
func (s *Store) ListTasks(ctx context.Context, p store.ListTasksParams) ([]*store.Task, error) {
	q := `SELECT ` + taskCols + ` FROM agent_tasks WHERE (?1 = '' OR tenant_id = ?1)
		AND (?2 = '' OR ticket_id = ?2) AND (?3 = '' OR sandbox_id = ?3) AND (?4 = '' OR kind = ?4) AND id > ?5`
	args := []any{p.TenantID, p.TicketID, p.SandboxID, string(p.Kind), p.AfterID}
	if len(p.Statuses) > 0 {
		in, a := inList(p.Statuses)
		q += ` AND status IN ` + in
		args = append(args, a...)
	}
	rows, err := s.read.QueryContext(ctx, q+` ORDER BY id LIMIT ?`, append(args, noLimit(p.Limit))...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list tasks: %w", err)
	}
	return collect(rows, "tasks", scanTask)
}

// TransitionTask implements store.MonitorStore as one conditional UPDATE
// (the bare ? of the IN list number on from ?11, after the largest ?N):
// writes queue on the single write connection, so of racing writers with
// the same From exactly one matches, and a task that already left From
// (say, completed) is never overwritten. The read that reports the current
// row on a mismatch runs in the same transaction.
func (s *Store) TransitionTask(ctx context.Context, p store.TransitionTaskParams) (store.TaskTransition, error) {
	if err := p.Check(); err != nil {
		return store.TaskTransition{}, err
	}
	result, err := jsonValue("task "+p.ID+": result", p.Patch.Result)
	if err != nil {
		return store.TaskTransition{}, err
	}
	at := micros(orNow(p.At, s.timestamp()))
	in, inArgs := inList(p.From)
	var out store.TaskTransition
	err = s.inTx(ctx, func(tx *wtx) error {
		args := []any{p.To, nullStr(p.Patch.SandboxID), nullStr(p.Patch.ProcessID), nullStr(p.Patch.TranscriptPath),
			nullStr(p.Patch.FailureReason), result, at, p.To == store.TaskRunning, p.To.Terminal(), p.ID}
		t, err := scanTask(tx.QueryRowContext(ctx, `UPDATE agent_tasks SET status = ?1,
			sandbox_id = COALESCE(?2, sandbox_id), process_id = COALESCE(?3, process_id),
			transcript_path = COALESCE(?4, transcript_path), failure_reason = COALESCE(?5, failure_reason),
			result = COALESCE(?6, result), version = version + 1, updated_at = ?7,
			started_at = CASE WHEN ?8 AND started_at IS NULL THEN ?7 ELSE started_at END,
			finished_at = CASE WHEN ?9 THEN ?7 ELSE finished_at END
			WHERE id = ?10 AND status IN `+in+` RETURNING `+taskCols, append(args, inArgs...)...))
		if err == nil {
			out = store.TaskTransition{OK: true, Task: t}
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlite: transition task %q: %w", p.ID, err)
		}
		t, err = scanTask(tx.QueryRowContext(ctx, `SELECT `+taskCols+` FROM agent_tasks WHERE id = ?`, p.ID))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("task %q: %w", p.ID, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("sqlite: read task %q: %w", p.ID, err)
		}
		out = store.TaskTransition{Task: t}
		return nil
	})
	if err != nil {
		return store.TaskTransition{}, err
	}
	return out, nil
}

// nullStr maps an optional patch field to NULL (keep) or its value.
func nullStr(v *string) sql.NullString {
	if v == nil {
		return sql.NullString{}
	}
	return sql.NullString{String: *v, Valid: true}
}
