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

// The environment work queue (issue 16). Every transition is one READ
// COMMITTED transaction that locks the item's row first (SELECT … FOR
// UPDATE), so a heartbeat's compare-then-extend and a stop never
// interleave with another writer of the item; a poll takes its item with
// SKIP LOCKED, so concurrent pollers never wait on, or take, one item.

const workCols = `id, tenant_id, environment_id, session_id, state, metadata, created_at, polled_at, polled_by,
	acked_at, started_at, heartbeat_at, lease_token, lease_expires_at, stop_requested_at, stopped_at`

func scanWork(row pgx.Row) (*store.WorkItem, error) {
	var (
		w    store.WorkItem
		meta string
	)
	if err := row.Scan(&w.ID, &w.TenantID, &w.EnvironmentID, &w.SessionID, &w.State, &meta, &w.CreatedAt, &w.PolledAt,
		&w.PolledBy, &w.AckedAt, &w.StartedAt, &w.HeartbeatAt, &w.LeaseToken, &w.LeaseExpiresAt, &w.StopRequestedAt,
		&w.StoppedAt); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(meta), &w.Metadata); err != nil {
		return nil, fmt.Errorf("postgres: decode metadata of work item %q: %w", w.ID, err)
	}
	if w.Metadata == nil {
		w.Metadata = map[string]string{}
	}
	w.CreatedAt = w.CreatedAt.UTC()
	w.PolledAt, w.AckedAt, w.StartedAt, w.HeartbeatAt = utcPtr(w.PolledAt), utcPtr(w.AckedAt), utcPtr(w.StartedAt), utcPtr(w.HeartbeatAt)
	w.LeaseExpiresAt, w.StopRequestedAt, w.StoppedAt = utcPtr(w.LeaseExpiresAt), utcPtr(w.StopRequestedAt), utcPtr(w.StoppedAt)
	return &w, nil
}

func encodeWorkMetadata(m map[string]string) string {
	if m == nil {
		return "{}"
	}
	b, _ := json.Marshal(m) // a map[string]string always marshals
	return string(b)
}

// getWork reads one item scoped to its tenant and environment; lock takes
// its row lock for the transition that follows. The row is found by its
// primary key alone and the scope checked here: a lookup by all three
// columns lets the planner, before any ANALYZE, walk work_items_list.
func getWork(ctx context.Context, q querier, tenantID, envID, id string, lock bool) (*store.WorkItem, error) {
	sql := `SELECT ` + workCols + ` FROM work_items WHERE id = $1`
	if lock {
		sql += ` FOR UPDATE`
	}
	w, err := scanWork(q.QueryRow(ctx, sql, id))
	if err == nil && (w.TenantID != tenantID || w.EnvironmentID != envID) {
		err = pgx.ErrNoRows // another tenant's or environment's item
	}
	if err != nil {
		return nil, mapErr(fmt.Sprintf("work item %s", id), err)
	}
	return w, nil
}

// EnsureSessionWork implements store.WorkStore. The partial unique index
// on a session's live item decides the race: the insert does nothing when
// the session has one (waiting for a racing insert to commit or roll
// back), and the live row is read instead. Should that row be stopped in
// between, the insert is tried again.
func (s *Store) EnsureSessionWork(ctx context.Context, w store.WorkItem) (*store.WorkItem, bool, error) {
	if w.TenantID == "" || w.EnvironmentID == "" || w.SessionID == "" {
		return nil, false, fmt.Errorf("work item: TenantID, EnvironmentID and SessionID are required: %w", store.ErrInvalid)
	}
	if w.ID == "" {
		w.ID = ids.New("work")
	}
	if w.CreatedAt.IsZero() {
		w.CreatedAt = s.clock()
	}
	var (
		out     *store.WorkItem
		created bool
	)
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		for range 3 {
			row, err := scanWork(tx.QueryRow(ctx, `INSERT INTO work_items
				(id, tenant_id, environment_id, session_id, state, metadata, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
				ON CONFLICT (session_id) WHERE state <> 'stopped' DO NOTHING RETURNING `+workCols,
				w.ID, w.TenantID, w.EnvironmentID, w.SessionID, store.WorkQueued, encodeWorkMetadata(w.Metadata), w.CreatedAt))
			switch {
			case err == nil:
				out, created = row, true
				return nil
			case isUniqueViolation(err):
				return fmt.Errorf("work item %q: %w", w.ID, store.ErrAlreadyExists)
			case !errors.Is(err, pgx.ErrNoRows):
				return mapErr("create work item of session "+w.SessionID, err)
			}
			row, err = scanWork(tx.QueryRow(ctx, `SELECT `+workCols+` FROM work_items
				WHERE session_id = $1 AND state <> 'stopped'`, w.SessionID))
			if err == nil {
				out, created = row, false
				return nil
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return mapErr("read live work item of session "+w.SessionID, err)
			}
		}
		return fmt.Errorf("work item of session %q: its live item kept stopping while it was created; try again: %w",
			w.SessionID, store.ErrConflict)
	})
	if err != nil {
		return nil, false, err
	}
	return out, created, nil
}

// ClaimWork implements store.WorkStore: reap the environment's lapsed
// leases, then hand out the oldest claimable queued item. Rows another
// transaction holds are skipped, in the reaping too: a heartbeat holding
// the row decides first, and the next poll looks again.
func (s *Store) ClaimWork(ctx context.Context, p store.ClaimWorkParams) (*store.WorkItem, error) {
	var out *store.WorkItem
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		out = nil
		if _, err := tx.Exec(ctx, `UPDATE work_items SET state = 'stopped', stopped_at = $3, lease_expires_at = NULL
			WHERE id IN (SELECT id FROM work_items WHERE tenant_id = $1 AND environment_id = $2 AND state = 'stopping'
				AND lease_expires_at <= $3 FOR UPDATE SKIP LOCKED)`,
			p.TenantID, p.EnvironmentID, p.Now); err != nil {
			return mapErr("stop lapsed work items", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE work_items SET state = 'queued', lease_token = '',
			lease_expires_at = NULL, heartbeat_at = NULL, started_at = NULL, acked_at = NULL, polled_at = NULL, polled_by = ''
			WHERE id IN (SELECT id FROM work_items WHERE tenant_id = $1 AND environment_id = $2
				AND state IN ('starting', 'active') AND lease_expires_at <= $3 FOR UPDATE SKIP LOCKED)`,
			p.TenantID, p.EnvironmentID, p.Now); err != nil {
			return mapErr("re-queue lapsed work items", err)
		}
		// Nothing to hand out still commits the reaping.
		row, err := scanWork(tx.QueryRow(ctx, `UPDATE work_items SET polled_at = $3, polled_by = $4
			WHERE id = (SELECT id FROM work_items WHERE tenant_id = $1 AND environment_id = $2 AND state = 'queued'
				AND (polled_at IS NULL OR polled_at <= $5) ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
			RETURNING `+workCols,
			p.TenantID, p.EnvironmentID, p.Now, p.WorkerID, p.Now.Add(-p.ReclaimOlderThan)))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return mapErr("claim work of environment "+p.EnvironmentID, err)
		default:
			out = row
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if out == nil {
		return nil, fmt.Errorf("queued work of environment %q: %w", p.EnvironmentID, store.ErrNotFound)
	}
	return out, nil
}

// AckWork implements store.WorkStore.
func (s *Store) AckWork(ctx context.Context, tenantID, envID, id string, now time.Time, ttl time.Duration) (*store.WorkItem, error) {
	var out *store.WorkItem
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		cur, err := getWork(ctx, tx, tenantID, envID, id, true)
		if err != nil {
			return err
		}
		if cur.State != store.WorkQueued {
			return fmt.Errorf("work item %q is %s; only a queued item can be acked: %w", id, cur.State, store.ErrConflict)
		}
		out, err = scanWork(tx.QueryRow(ctx, `UPDATE work_items SET state = 'starting', acked_at = $2,
			lease_token = '', lease_expires_at = $3 WHERE id = $1 RETURNING `+workCols, id, now, now.Add(ttl)))
		return mapErr("ack work item "+id, err)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// HeartbeatWork implements store.WorkStore.
func (s *Store) HeartbeatWork(ctx context.Context, p store.HeartbeatWorkParams) (*store.WorkItem, error) {
	var out *store.WorkItem
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		cur, err := getWork(ctx, tx, p.TenantID, p.EnvironmentID, p.ID, true)
		if err != nil {
			return err
		}
		switch {
		case cur.State == store.WorkStopped:
			out = cur
			return nil
		case cur.State == store.WorkQueued || cur.LeaseToken != p.Expected:
			return fmt.Errorf("work item %q: %w", p.ID, &store.LeaseLostError{Current: cur})
		}
		out, err = scanWork(tx.QueryRow(ctx, `UPDATE work_items SET lease_token = $2, heartbeat_at = $3,
			lease_expires_at = $4, started_at = coalesce(started_at, $3),
			state = CASE WHEN state = 'starting' THEN 'active' ELSE state END
			WHERE id = $1 RETURNING `+workCols,
			p.ID, store.NextLeaseToken(cur.LeaseToken, p.Now), p.Now, p.Now.Add(p.TTL)))
		return mapErr("heartbeat work item "+p.ID, err)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// StopWork implements store.WorkStore.
func (s *Store) StopWork(ctx context.Context, tenantID, envID, id string, force bool, now time.Time) (*store.WorkItem, error) {
	var out *store.WorkItem
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		cur, err := getWork(ctx, tx, tenantID, envID, id, true)
		if err != nil {
			return err
		}
		if cur.State == store.WorkStopped {
			return fmt.Errorf("work item %q is stopped already: %w", id, store.ErrConflict)
		}
		q := `UPDATE work_items SET state = 'stopping', stop_requested_at = coalesce(stop_requested_at, $2)
			WHERE id = $1 RETURNING ` + workCols
		if force || cur.State == store.WorkQueued {
			q = `UPDATE work_items SET state = 'stopped', stop_requested_at = coalesce(stop_requested_at, $2),
				stopped_at = $2, lease_expires_at = NULL WHERE id = $1 RETURNING ` + workCols
		}
		out, err = scanWork(tx.QueryRow(ctx, q, id, now))
		return mapErr("stop work item "+id, err)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// StopSessionWork implements store.WorkStore.
func (s *Store) StopSessionWork(ctx context.Context, sessionID string, now time.Time) error {
	_, err := s.pool.Exec(ctx, `UPDATE work_items SET state = 'stopped',
		stop_requested_at = coalesce(stop_requested_at, $2), stopped_at = $2, lease_expires_at = NULL
		WHERE session_id = $1 AND state <> 'stopped'`, sessionID, now)
	return mapErr("stop work of session "+sessionID, err)
}

// GetWork implements store.WorkStore.
func (s *Store) GetWork(ctx context.Context, tenantID, envID, id string) (*store.WorkItem, error) {
	return getWork(ctx, s.pool, tenantID, envID, id, false)
}

// ListWork implements store.WorkStore. An unknown cursor is ErrNotFound
// rather than an empty page, so a bad page token is not taken for the end.
func (s *Store) ListWork(ctx context.Context, tenantID, envID, after string, limit int) ([]*store.WorkItem, error) {
	if limit <= 0 {
		limit = 100
	}
	// After a cursor, the page is a range of work_items_list.
	q, args := ``, []any{tenantID, envID, limit}
	if after != "" {
		cur, err := getWork(ctx, s.pool, tenantID, envID, after, false)
		if err != nil {
			return nil, fmt.Errorf("list work items after cursor: %w", err)
		}
		q, args = ` AND (created_at, id) < ($4, $5)`, append(args, cur.CreatedAt, cur.ID)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+workCols+` FROM work_items
		WHERE tenant_id = $1 AND environment_id = $2`+q+` ORDER BY created_at DESC, id DESC LIMIT $3`, args...)
	if err != nil {
		return nil, mapErr("list work items", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.WorkItem, error) { return scanWork(row) })
	return out, mapErr("list work items", err)
}

// UpdateWorkMetadata implements store.WorkStore.
func (s *Store) UpdateWorkMetadata(ctx context.Context, tenantID, envID, id string, patch map[string]*string) (*store.WorkItem, error) {
	var out *store.WorkItem
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		cur, err := getWork(ctx, tx, tenantID, envID, id, true)
		if err != nil {
			return err
		}
		meta := encodeWorkMetadata(store.PatchWorkMetadata(cur.Metadata, patch))
		out, err = scanWork(tx.QueryRow(ctx, `UPDATE work_items SET metadata = $2 WHERE id = $1 RETURNING `+workCols, id, meta))
		return mapErr("update metadata of work item "+id, err)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// WorkStats implements store.WorkStore.
func (s *Store) WorkStats(ctx context.Context, tenantID, envID string, now time.Time, reclaimAge time.Duration) (store.WorkStats, error) {
	var st store.WorkStats
	if err := s.pool.QueryRow(ctx, `SELECT
		count(*) FILTER (WHERE polled_at IS NULL OR polled_at <= $3),
		count(*) FILTER (WHERE polled_at > $3),
		min(created_at)
		FROM work_items WHERE tenant_id = $1 AND environment_id = $2 AND state = 'queued'`,
		tenantID, envID, now.Add(-reclaimAge)).Scan(&st.Depth, &st.Pending, &st.OldestQueuedAt); err != nil {
		return store.WorkStats{}, mapErr("work stats of environment "+envID, err)
	}
	st.OldestQueuedAt = utcPtr(st.OldestQueuedAt)
	return st, nil
}
