package postgres

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/store"
)

// AppendEventsBatch appends every session's events in one transaction.
// Sessions are locked in id order, so two concurrent batches that share
// sessions queue on the first shared row instead of deadlocking.
func (s *Store) AppendEventsBatch(ctx context.Context, batch map[string][]store.NewEvent) (map[string][]store.SessionEvent, error) {
	sessions := make([]string, 0, len(batch))
	for id := range batch {
		sessions = append(sessions, id)
	}
	slices.Sort(sessions)
	valid := make([]eventBatch, len(sessions))
	for i, id := range sessions {
		b, err := validateEvents(id, batch[id])
		if err != nil {
			return nil, err
		}
		valid[i] = b
	}
	var out map[string][]store.SessionEvent
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		// Built afresh on every attempt: inTx retries serialization failures.
		out = make(map[string][]store.SessionEvent, len(sessions))
		now := s.clock()
		for i, id := range sessions {
			evs, err := s.appendEventsTx(ctx, tx, now, id, valid[i])
			if err != nil {
				return err
			}
			out[id] = evs
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
