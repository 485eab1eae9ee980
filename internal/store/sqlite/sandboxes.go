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

var _ store.SandboxStore = (*Store)(nil)

// CreateSandbox implements store.SandboxStore: a new sandbox at version 1.
// Zero CreatedAt becomes now; zero UpdatedAt and LastActivityAt become
// CreatedAt (the idle clock starts at creation). ON CONFLICT DO NOTHING
// settles concurrent creators: one gets the row, the rest ErrAlreadyExists.
func (s *Store) CreateSandbox(ctx context.Context, sb *store.Sandbox) (*store.Sandbox, error) {
	in := *sb
	if in.ID == "" {
		in.ID = ids.New("sbx")
	}
	a, err := validateSandbox(&in)
	if err != nil {
		return nil, err
	}
	if in.CreatedAt.IsZero() {
		in.CreatedAt = s.timestamp()
	}
	if in.UpdatedAt.IsZero() {
		in.UpdatedAt = in.CreatedAt
	}
	if in.LastActivityAt.IsZero() {
		in.LastActivityAt = in.CreatedAt
	}
	var out *store.Sandbox
	err = s.inTx(ctx, func(tx *wtx) error {
		row, err := scanSandbox(tx.QueryRowContext(ctx, `INSERT INTO sandboxes
		(id, tenant_id, driver, image, network, limits, sleep_after_ms, metadata,
		 environment, session_key, handle, started_at, warmed_at, stopping_at, destroyed_at,
		 generation, last_activity_at, version, created_at, updated_at, node)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?)
		ON CONFLICT (id) DO NOTHING RETURNING `+sandboxCols,
			in.ID, in.TenantID, in.Driver, in.Image, in.Network, a.limits, a.sleepMS, a.metadata,
			in.Environment, in.SessionKey, a.handle, a.started, a.warmed, a.stopping, a.destroyed,
			in.Generation, micros(in.LastActivityAt), micros(in.CreatedAt), micros(in.UpdatedAt), in.Node))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sandbox %q: %w", in.ID, store.ErrAlreadyExists)
		}
		if err != nil {
			return fmt.Errorf("sqlite: create sandbox %q: %w", in.ID, err)
		}
		out = row
		return recordTransition(ctx, tx, row, row.CreatedAt)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// recordTransition adds sb's state to its history if the newest recorded
// state differs, in the transaction that wrote sb's facts, and drops what
// falls out of the kept window.
func recordTransition(ctx context.Context, tx *wtx, sb *store.Sandbox, now time.Time) error {
	var seq int64
	var last string
	err := tx.QueryRowContext(ctx, `SELECT seq, state FROM sandbox_transitions
		WHERE sandbox_id = ? ORDER BY seq DESC LIMIT 1`, sb.ID).Scan(&seq, &last)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("sqlite: read transitions of sandbox %q: %w", sb.ID, err)
	}
	state := sb.State()
	if state == last {
		return nil
	}
	seq++
	if _, err := tx.ExecContext(ctx, `INSERT INTO sandbox_transitions (sandbox_id, seq, state, at, generation)
		VALUES (?, ?, ?, ?, ?)`, sb.ID, seq, state, micros(sb.TransitionAt(now)), sb.Generation); err != nil {
		return fmt.Errorf("sqlite: record transition of sandbox %q: %w", sb.ID, err)
	}
	if seq > store.MaxSandboxTransitions {
		if _, err := tx.ExecContext(ctx, `DELETE FROM sandbox_transitions WHERE sandbox_id = ? AND seq <= ?`,
			sb.ID, seq-store.MaxSandboxTransitions); err != nil {
			return fmt.Errorf("sqlite: trim transitions of sandbox %q: %w", sb.ID, err)
		}
	}
	return nil
}

// ListSandboxTransitions implements store.SandboxStore.
func (s *Store) ListSandboxTransitions(ctx context.Context, id string) ([]store.SandboxTransition, error) {
	var n int
	if err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM sandboxes WHERE id = ?`, id).Scan(&n); err != nil {
		return nil, fmt.Errorf("sqlite: read sandbox %q: %w", id, err)
	}
	if n == 0 {
		return nil, fmt.Errorf("sandbox %q: %w", id, store.ErrNotFound)
	}
	rows, err := s.read.QueryContext(ctx, `SELECT seq, state, at, generation FROM sandbox_transitions
		WHERE sandbox_id = ? ORDER BY seq`, id)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list transitions of sandbox %q: %w", id, err)
	}
	defer rows.Close()
	out := []store.SandboxTransition{}
	for rows.Next() {
		var tr store.SandboxTransition
		var at int64
		if err := rows.Scan(&tr.Seq, &tr.State, &at, &tr.Generation); err != nil {
			return nil, fmt.Errorf("sqlite: scan transition: %w", err)
		}
		tr.At = fromMicros(at)
		out = append(out, tr)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list transitions of sandbox %q: %w", id, err)
	}
	return out, nil
}

// GetSandbox implements store.SandboxStore: destroyed or not, or ErrNotFound.
func (s *Store) GetSandbox(ctx context.Context, id string) (*store.Sandbox, error) {
	sb, err := scanSandbox(s.read.QueryRowContext(ctx, `SELECT `+sandboxCols+` FROM sandboxes WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sandbox %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get sandbox %q: %w", id, err)
	}
	return sb, nil
}

// ListSandboxes implements store.SandboxStore: id order, keyed on id alone,
// so AfterID need not name a sandbox. An empty TenantID lists every
// tenant's (the reaper and recovery sweep them all); Limit <= 0 is no limit.
// Running and Node are written into the statement only when set, Running
// as the very predicate of the sandboxes_running index, so the planner
// uses it.
func (s *Store) ListSandboxes(ctx context.Context, p store.ListSandboxesParams) ([]*store.Sandbox, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	q := `SELECT ` + sandboxCols + ` FROM sandboxes
		WHERE (?1 = '' OR tenant_id = ?1)
		  AND (?2 OR destroyed_at IS NULL)
		  AND id > ?3`
	args := []any{p.TenantID, p.IncludeDestroyed, p.AfterID, limit}
	if p.Running {
		q += ` AND (handle IS NOT NULL OR stopping_at IS NOT NULL)`
	}
	if p.Node != "" {
		q += ` AND node = ?5`
		args = append(args, p.Node)
	}
	rows, err := s.read.QueryContext(ctx, q+` ORDER BY id LIMIT ?4`, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list sandboxes: %w", err)
	}
	defer rows.Close()
	out := []*store.Sandbox{}
	for rows.Next() {
		sb, err := scanSandbox(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: scan sandbox: %w", err)
		}
		out = append(out, sb)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list sandboxes: %w", err)
	}
	return out, nil
}

// UpdateSandbox implements store.SandboxStore as a compare-and-set UPDATE.
// Writes queue on the one write connection, so exactly one writer per
// version matches; the version read that tells a stale version from a
// missing sandbox runs in the same transaction, so it sees the row the
// UPDATE missed.
func (s *Store) UpdateSandbox(ctx context.Context, sb *store.Sandbox) (*store.Sandbox, error) {
	a, err := validateSandbox(sb)
	if err != nil {
		return nil, err
	}
	var out *store.Sandbox
	err = s.inTx(ctx, func(tx *wtx) error {
		row, err := scanSandbox(tx.QueryRowContext(ctx, `UPDATE sandboxes SET
			driver = ?, image = ?, network = ?, limits = ?, sleep_after_ms = ?, metadata = ?,
			environment = ?, session_key = ?, handle = ?, started_at = ?, warmed_at = ?,
			stopping_at = ?, destroyed_at = ?, generation = ?, last_activity_at = ?,
			version = version + 1, updated_at = ?, node = ?
			WHERE id = ? AND version = ? RETURNING `+sandboxCols,
			sb.Driver, sb.Image, sb.Network, a.limits, a.sleepMS, a.metadata,
			sb.Environment, sb.SessionKey, a.handle, a.started, a.warmed,
			a.stopping, a.destroyed, sb.Generation, micros(sb.LastActivityAt),
			micros(s.timestamp()), sb.Node, sb.ID, sb.Version))
		if err == nil {
			out = row
			return recordTransition(ctx, tx, row, row.UpdatedAt)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlite: update sandbox %q: %w", sb.ID, err)
		}
		var current int64
		err = tx.QueryRowContext(ctx, `SELECT version FROM sandboxes WHERE id = ?`, sb.ID).Scan(&current)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sandbox %q: %w", sb.ID, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("sqlite: read version of sandbox %q: %w", sb.ID, err)
		}
		return fmt.Errorf("update sandbox %q: expected version %d, current version %d: %w",
			sb.ID, sb.Version, current, store.ErrVersionMismatch)
	})
	return out, err
}

// TouchSandbox implements store.SandboxStore. It sets LastActivityAt to at,
// even if earlier than the stored value (it records what the caller saw),
// and leaves version and updated_at alone so it never fails an update.
func (s *Store) TouchSandbox(ctx context.Context, id string, at time.Time) error {
	res, err := s.write.ExecContext(ctx, `UPDATE sandboxes SET last_activity_at = ? WHERE id = ?`, micros(at), id)
	if err != nil {
		return fmt.Errorf("sqlite: touch sandbox %q: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("sandbox %q: %w", id, store.ErrNotFound)
	}
	return nil
}

// DeleteSandbox implements store.SandboxStore: the sandbox and its
// history. Backups stay until their TTL: a new sandbox with the same
// (tenant, environment, session key) restores from them.
func (s *Store) DeleteSandbox(ctx context.Context, id string) error {
	return s.inTx(ctx, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM sandboxes WHERE id = ?`, id)
		if err != nil {
			return fmt.Errorf("sqlite: delete sandbox %q: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("sandbox %q: %w", id, store.ErrNotFound)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM sandbox_transitions WHERE sandbox_id = ?`, id); err != nil {
			return fmt.Errorf("sqlite: delete transitions of sandbox %q: %w", id, err)
		}
		return nil
	})
}
