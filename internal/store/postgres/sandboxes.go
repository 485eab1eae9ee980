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

var _ store.SandboxStore = (*Store)(nil)

// CreateSandbox inserts a sandbox at version 1. Zero CreatedAt becomes now,
// zero UpdatedAt becomes CreatedAt and zero LastActivityAt becomes CreatedAt
// (the idle clock starts at creation). The primary key settles concurrent
// creators: one wins, the others get ErrAlreadyExists.
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
		in.CreatedAt = s.clock()
	}
	if in.UpdatedAt.IsZero() {
		in.UpdatedAt = in.CreatedAt
	}
	if in.LastActivityAt.IsZero() {
		in.LastActivityAt = in.CreatedAt
	}
	out, err := scanSandbox(s.pool.QueryRow(ctx, `WITH row AS (INSERT INTO sandboxes
		(id, tenant_id, driver, image, network, limits, sleep_after_ms, metadata,
		 environment, session_key, handle, started_at, warmed_at, stopping_at, destroyed_at,
		 generation, last_activity_at, version, created_at, updated_at, node)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, 1, $18, $19, $20)
		RETURNING `+sandboxCols+`)`+recordTransitionCTE(21, 22)+`
		SELECT `+sandboxCols+` FROM row`,
		in.ID, in.TenantID, in.Driver, in.Image, in.Network, a.limits, a.sleepMS, a.metadata,
		in.Environment, in.SessionKey, a.handle, in.StartedAt, in.WarmedAt, in.StoppingAt, in.DestroyedAt,
		in.Generation, in.LastActivityAt, in.CreatedAt, in.UpdatedAt, in.Node,
		in.State(), in.TransitionAt(in.CreatedAt)))
	if err != nil {
		if isUniqueViolation(err) {
			return nil, fmt.Errorf("create sandbox %s: %w", in.ID, store.ErrAlreadyExists)
		}
		return nil, mapErr(fmt.Sprintf("create sandbox %s", in.ID), err)
	}
	return out, nil
}

// GetSandbox returns the sandbox, destroyed or not, or ErrNotFound.
func (s *Store) GetSandbox(ctx context.Context, id string) (*store.Sandbox, error) {
	sb, err := scanSandbox(s.pool.QueryRow(ctx, "SELECT "+sandboxCols+" FROM sandboxes WHERE id = $1", id))
	if err != nil {
		return nil, mapErr(fmt.Sprintf("sandbox %s", id), err)
	}
	return sb, nil
}

// ListSandboxes pages through sandboxes in id order, keyed on id alone, so
// AfterID need not name an existing sandbox. An empty TenantID lists every
// tenant's (the reaper and recovery sweep them all); Limit <= 0 is no limit.
// Running and Node are written into the statement only when set, as the
// predicate of the sandboxes_running index, which the planner can then
// prove and use.
func (s *Store) ListSandboxes(ctx context.Context, p store.ListSandboxesParams) ([]*store.Sandbox, error) {
	var limit *int
	if p.Limit > 0 {
		limit = &p.Limit
	}
	q := "SELECT " + sandboxCols + ` FROM sandboxes
		WHERE ($1::text = '' OR tenant_id = $1)
		  AND ($2::boolean OR destroyed_at IS NULL)
		  AND ($3::text = '' OR id > $3)`
	args := []any{p.TenantID, p.IncludeDestroyed, p.AfterID, limit}
	if p.Running {
		q += ` AND (handle IS NOT NULL OR stopping_at IS NOT NULL)`
	}
	if p.Node != "" {
		args = append(args, p.Node)
		q += ` AND node = $5`
	}
	rows, err := s.pool.Query(ctx, q+` ORDER BY id LIMIT $4`, args...)
	if err != nil {
		return nil, mapErr("list sandboxes", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Sandbox, error) { return scanSandbox(row) })
	if err != nil {
		return nil, mapErr("list sandboxes", err)
	}
	if out == nil {
		out = []*store.Sandbox{}
	}
	return out, nil
}

// UpdateSandbox is one compare-and-set UPDATE: under READ COMMITTED a
// concurrent writer waits for the row lock and then re-checks the version
// against the committed row, so exactly one writer per version wins.
// TouchSandbox leaves version alone, so it never makes this fail.
func (s *Store) UpdateSandbox(ctx context.Context, sb *store.Sandbox) (*store.Sandbox, error) {
	a, err := validateSandbox(sb)
	if err != nil {
		return nil, err
	}
	now := s.clock()
	out, err := scanSandbox(s.pool.QueryRow(ctx, `WITH row AS (UPDATE sandboxes SET
		driver = $3, image = $4, network = $5, limits = $6, sleep_after_ms = $7, metadata = $8,
		environment = $9, session_key = $10, handle = $11, started_at = $12, warmed_at = $13,
		stopping_at = $14, destroyed_at = $15, generation = $16, last_activity_at = $17,
		version = version + 1, updated_at = $18, node = $19
		WHERE id = $1 AND version = $2 RETURNING `+sandboxCols+`)`+recordTransitionCTE(20, 21)+`
		SELECT `+sandboxCols+` FROM row`,
		sb.ID, sb.Version, sb.Driver, sb.Image, sb.Network, a.limits, a.sleepMS, a.metadata,
		sb.Environment, sb.SessionKey, a.handle, sb.StartedAt, sb.WarmedAt,
		sb.StoppingAt, sb.DestroyedAt, sb.Generation, sb.LastActivityAt, now, sb.Node,
		sb.State(), sb.TransitionAt(now)))
	if err == nil {
		return out, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, mapErr(fmt.Sprintf("update sandbox %s", sb.ID), err)
	}
	// No row matched: tell a missing sandbox from a stale version.
	var current int64
	if err := s.pool.QueryRow(ctx, "SELECT version FROM sandboxes WHERE id = $1", sb.ID).Scan(&current); err != nil {
		return nil, mapErr(fmt.Sprintf("update sandbox %s", sb.ID), err)
	}
	return nil, fmt.Errorf("update sandbox %s: expected version %d, current version %d: %w",
		sb.ID, sb.Version, current, store.ErrVersionMismatch)
}

// recordTransitionCTE follows a CTE "row" that wrote a sandbox ($1 its id,
// $16 its generation) with the history's part of the same statement: the
// state (parameter state), entered at parameter at, is added when the newest recorded state
// differs, and what falls out of the kept window goes. It writes only if
// row wrote (an update that lost its version check records nothing), and a
// writer that won the check is the only one for that version, so seq
// cannot be taken twice.
func recordTransitionCTE(state, at int) string {
	return fmt.Sprintf(`,
	last AS (SELECT seq, state FROM sandbox_transitions WHERE sandbox_id = $1 ORDER BY seq DESC LIMIT 1),
	ins AS (INSERT INTO sandbox_transitions (sandbox_id, seq, state, at, generation)
		SELECT $1, COALESCE((SELECT seq FROM last), 0) + 1, $%[1]d::text, $%[2]d::timestamptz, $16 FROM row
		WHERE $%[1]d::text IS DISTINCT FROM (SELECT state FROM last)
		RETURNING seq),
	trim AS (DELETE FROM sandbox_transitions WHERE sandbox_id = $1
		AND seq <= (SELECT seq FROM ins) - %[3]d)`, state, at, store.MaxSandboxTransitions)
}

// ListSandboxTransitions returns the sandbox's history, oldest first.
func (s *Store) ListSandboxTransitions(ctx context.Context, id string) ([]store.SandboxTransition, error) {
	rows, err := s.pool.Query(ctx, `SELECT t.seq, t.state, t.at, t.generation
		FROM sandboxes s LEFT JOIN sandbox_transitions t ON t.sandbox_id = s.id
		WHERE s.id = $1 ORDER BY t.seq`, id)
	if err != nil {
		return nil, mapErr(fmt.Sprintf("list transitions of sandbox %s", id), err)
	}
	defer rows.Close()
	out := []store.SandboxTransition{}
	found := false
	for rows.Next() {
		found = true
		var seq, gen *int64
		var state *string
		var at *time.Time
		if err := rows.Scan(&seq, &state, &at, &gen); err != nil {
			return nil, mapErr(fmt.Sprintf("list transitions of sandbox %s", id), err)
		}
		if seq == nil { // the sandbox, with no history yet
			continue
		}
		out = append(out, store.SandboxTransition{Seq: *seq, State: *state, At: at.UTC(), Generation: *gen})
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr(fmt.Sprintf("list transitions of sandbox %s", id), err)
	}
	if !found {
		return nil, fmt.Errorf("sandbox %s: %w", id, store.ErrNotFound)
	}
	return out, nil
}

// TouchSandbox sets LastActivityAt to at, even if that is earlier than the
// stored value: it records what the caller saw, without a version check.
func (s *Store) TouchSandbox(ctx context.Context, id string, at time.Time) error {
	tag, err := s.pool.Exec(ctx, "UPDATE sandboxes SET last_activity_at = $2 WHERE id = $1", id, at)
	if err != nil {
		return mapErr(fmt.Sprintf("touch sandbox %s", id), err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("touch sandbox %s: %w", id, store.ErrNotFound)
	}
	return nil
}

// DeleteSandbox removes the sandbox row and its history. Its backups stay until their TTL:
// a new sandbox with the same (tenant, environment, session key) restores
// from them.
func (s *Store) DeleteSandbox(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, `WITH history AS (DELETE FROM sandbox_transitions WHERE sandbox_id = $1)
		DELETE FROM sandboxes WHERE id = $1`, id)
	if err != nil {
		return mapErr(fmt.Sprintf("delete sandbox %s", id), err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete sandbox %s: %w", id, store.ErrNotFound)
	}
	return nil
}
