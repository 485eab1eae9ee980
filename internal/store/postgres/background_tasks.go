package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// backgroundTaskCap is the seed-003 limit on a background task's life; a
// zero Deadline becomes StartedAt plus it.
const backgroundTaskCap = 30 * time.Minute

// bgtCols is the column list scanBackgroundTask reads, in order.
const bgtCols = `id, session_id, sandbox_id, process_id, command, status, exit_code, started_at, deadline, updated_at`

func scanBackgroundTask(row pgx.Row) (*store.BackgroundTask, error) {
	var t store.BackgroundTask
	if err := row.Scan(&t.ID, &t.SessionID, &t.SandboxID, &t.ProcessID, &t.Command, &t.Status,
		&t.ExitCode, &t.StartedAt, &t.Deadline, &t.UpdatedAt); err != nil {
		return nil, err
	}
	t.StartedAt, t.Deadline, t.UpdatedAt = t.StartedAt.UTC(), t.Deadline.UTC(), t.UpdatedAt.UTC()
	return &t, nil
}

// validBackgroundStatus lists the statuses store.BackgroundTask documents.
func validBackgroundStatus(status string) bool {
	switch status {
	case "running", "exited", "killed", "expired":
		return true
	}
	return false
}

// CreateBackgroundTask inserts a task. An empty ID becomes a fresh "bgt"
// id, an empty Status "running", zero StartedAt now, zero Deadline
// StartedAt plus the 30-minute cap and zero UpdatedAt StartedAt.
func (s *Store) CreateBackgroundTask(ctx context.Context, t *store.BackgroundTask) (*store.BackgroundTask, error) {
	in := *t
	if in.ID == "" {
		in.ID = ids.New("bgt")
	}
	if in.Status == "" {
		in.Status = "running"
	}
	if in.SessionID == "" || !validBackgroundStatus(in.Status) {
		return nil, fmt.Errorf("background task %q: SessionID is required and Status %q must be running, exited, killed or expired: %w",
			in.ID, in.Status, store.ErrInvalid)
	}
	if in.StartedAt.IsZero() {
		in.StartedAt = s.clock()
	}
	if in.Deadline.IsZero() {
		in.Deadline = in.StartedAt.Add(backgroundTaskCap)
	}
	if in.UpdatedAt.IsZero() {
		in.UpdatedAt = in.StartedAt
	}
	out, err := scanBackgroundTask(s.pool.QueryRow(ctx, `INSERT INTO background_tasks
		(id, session_id, sandbox_id, process_id, command, status, exit_code, started_at, deadline, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING `+bgtCols,
		in.ID, in.SessionID, in.SandboxID, in.ProcessID, in.Command, in.Status, in.ExitCode,
		in.StartedAt, in.Deadline, in.UpdatedAt))
	if err != nil {
		if isUniqueViolation(err) {
			return nil, fmt.Errorf("background task %q: %w", in.ID, store.ErrAlreadyExists)
		}
		return nil, mapErr(fmt.Sprintf("create background task %s", in.ID), err)
	}
	return out, nil
}

// UpdateBackgroundTask writes Status and ExitCode and sets UpdatedAt to
// now; the other fields are fixed at creation.
func (s *Store) UpdateBackgroundTask(ctx context.Context, t *store.BackgroundTask) (*store.BackgroundTask, error) {
	if !validBackgroundStatus(t.Status) {
		return nil, fmt.Errorf("background task %q: Status %q must be running, exited, killed or expired: %w",
			t.ID, t.Status, store.ErrInvalid)
	}
	out, err := scanBackgroundTask(s.pool.QueryRow(ctx, `UPDATE background_tasks SET
		status = $2, exit_code = $3, updated_at = $4 WHERE id = $1 RETURNING `+bgtCols,
		t.ID, t.Status, t.ExitCode, s.clock()))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("background task %q: %w", t.ID, store.ErrNotFound)
	}
	if err != nil {
		return nil, mapErr(fmt.Sprintf("update background task %s", t.ID), err)
	}
	return out, nil
}

// GetBackgroundTask returns the task or ErrNotFound.
func (s *Store) GetBackgroundTask(ctx context.Context, id string) (*store.BackgroundTask, error) {
	t, err := scanBackgroundTask(s.pool.QueryRow(ctx, `SELECT `+bgtCols+` FROM background_tasks WHERE id = $1`, id))
	if err != nil {
		return nil, mapErr(fmt.Sprintf("background task %s", id), err)
	}
	return t, nil
}

// ListBackgroundTasks lists tasks in start order, filtered by session and
// status when they are set.
func (s *Store) ListBackgroundTasks(ctx context.Context, sessionID, status string) ([]*store.BackgroundTask, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+bgtCols+` FROM background_tasks
		WHERE ($1::text = '' OR session_id = $1) AND ($2::text = '' OR status = $2)
		ORDER BY started_at, id`, sessionID, status)
	if err != nil {
		return nil, mapErr("list background tasks", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.BackgroundTask, error) { return scanBackgroundTask(row) })
	if err != nil {
		return nil, mapErr("list background tasks", err)
	}
	if out == nil {
		out = []*store.BackgroundTask{}
	}
	return out, nil
}
