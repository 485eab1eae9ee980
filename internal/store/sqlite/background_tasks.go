package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// backgroundTaskCap is the seed-003 limit on a background task's life; a
// zero Deadline becomes StartedAt plus it.
const backgroundTaskCap = 30 * time.Minute

// bgtCols is the column list scanBackgroundTask reads, in order.
const bgtCols = `id, session_id, sandbox_id, process_id, command, status, exit_code, started_at, deadline, updated_at`

func scanBackgroundTask(r scanner) (*store.BackgroundTask, error) {
	var (
		t                          store.BackgroundTask
		exit                       sql.NullInt64
		started, deadline, updated int64
	)
	if err := r.Scan(&t.ID, &t.SessionID, &t.SandboxID, &t.ProcessID, &t.Command, &t.Status,
		&exit, &started, &deadline, &updated); err != nil {
		return nil, err
	}
	if exit.Valid {
		t.ExitCode = &exit.Int64
	}
	t.StartedAt, t.Deadline, t.UpdatedAt = fromMicros(started), fromMicros(deadline), fromMicros(updated)
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

func nullInt(p *int64) sql.NullInt64 {
	if p == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: *p, Valid: true}
}

// CreateBackgroundTask implements store.OpStore. An empty ID becomes a
// fresh "bgt" id, an empty Status "running", zero StartedAt now, zero
// Deadline StartedAt plus the 30-minute cap and zero UpdatedAt StartedAt.
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
		in.StartedAt = s.timestamp()
	}
	if in.Deadline.IsZero() {
		in.Deadline = in.StartedAt.Add(backgroundTaskCap)
	}
	if in.UpdatedAt.IsZero() {
		in.UpdatedAt = in.StartedAt
	}
	out, err := scanBackgroundTask(s.write.QueryRowContext(ctx, `INSERT INTO background_tasks
		(id, session_id, sandbox_id, process_id, command, status, exit_code, started_at, deadline, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO NOTHING RETURNING `+bgtCols,
		in.ID, in.SessionID, in.SandboxID, in.ProcessID, in.Command, in.Status, nullInt(in.ExitCode),
		micros(in.StartedAt), micros(in.Deadline), micros(in.UpdatedAt)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("background task %q: %w", in.ID, store.ErrAlreadyExists)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: create background task %q: %w", in.ID, err)
	}
	return out, nil
}

// UpdateBackgroundTask implements store.OpStore: it writes Status and
// ExitCode, and sets UpdatedAt to now; the other fields are fixed at
// creation.
func (s *Store) UpdateBackgroundTask(ctx context.Context, t *store.BackgroundTask) (*store.BackgroundTask, error) {
	if !validBackgroundStatus(t.Status) {
		return nil, fmt.Errorf("background task %q: Status %q must be running, exited, killed or expired: %w",
			t.ID, t.Status, store.ErrInvalid)
	}
	out, err := scanBackgroundTask(s.write.QueryRowContext(ctx, `UPDATE background_tasks SET
		status = ?, exit_code = ?, updated_at = ? WHERE id = ? RETURNING `+bgtCols,
		t.Status, nullInt(t.ExitCode), micros(s.timestamp()), t.ID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("background task %q: %w", t.ID, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: update background task %q: %w", t.ID, err)
	}
	return out, nil
}

// GetBackgroundTask implements store.OpStore.
func (s *Store) GetBackgroundTask(ctx context.Context, id string) (*store.BackgroundTask, error) {
	t, err := scanBackgroundTask(s.read.QueryRowContext(ctx,
		`SELECT `+bgtCols+` FROM background_tasks WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("background task %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get background task %q: %w", id, err)
	}
	return t, nil
}

// ListBackgroundTasks implements store.OpStore, in start order.
func (s *Store) ListBackgroundTasks(ctx context.Context, sessionID, status string) ([]*store.BackgroundTask, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+bgtCols+` FROM background_tasks
		WHERE (?1 = '' OR session_id = ?1) AND (?2 = '' OR status = ?2)
		ORDER BY started_at, id`, sessionID, status)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list background tasks: %w", err)
	}
	defer rows.Close()
	out := []*store.BackgroundTask{}
	for rows.Next() {
		t, err := scanBackgroundTask(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: scan background task: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list background tasks: %w", err)
	}
	return out, nil
}
