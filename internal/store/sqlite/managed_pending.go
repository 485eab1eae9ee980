package sqlite

import (
	"context"
	"fmt"
)

// pendingSessionsSQL finds queued input with no turn to take it.
const pendingSessionsSQL = `SELECT s.id FROM sessions s
WHERE s.kind = 'managed' AND s.branch_of = '' AND s.terminated_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.session_id = s.id AND r.status = 'running' AND r.owner <> '')
  AND EXISTS (SELECT 1 FROM messages e
              WHERE e.session_id = s.id AND e.seq > s.processed_seq AND e.role LIKE 'user.%')
ORDER BY s.id`

// ListPendingSessions implements store.ManagedStore.
func (s *Store) ListPendingSessions(ctx context.Context) ([]string, error) {
	rows, err := s.read.QueryContext(ctx, pendingSessionsSQL)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list pending sessions: %w", err)
	}
	defer rows.Close()
	ids := []string{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("sqlite: list pending sessions: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list pending sessions: %w", err)
	}
	return ids, nil
}
