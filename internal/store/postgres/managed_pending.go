package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// pendingSessionsSQL finds queued input with no turn to take it.
const pendingSessionsSQL = `SELECT s.id FROM managed_sessions s
WHERE s.terminated_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM run_rows r WHERE r.session_id = s.id)
  AND EXISTS (SELECT 1 FROM session_events e
              WHERE e.session_id = s.id AND e.seq > s.processed_seq AND e.type LIKE 'user.%')
ORDER BY s.id`

// ListPendingSessions implements store.ManagedStore.
func (s *Store) ListPendingSessions(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, pendingSessionsSQL)
	if err != nil {
		return nil, mapErr("list pending sessions", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, mapErr("list pending sessions", err)
	}
	if ids == nil {
		ids = []string{}
	}
	return ids, nil
}
