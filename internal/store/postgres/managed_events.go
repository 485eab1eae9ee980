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

// eventBatch is a validated batch as the column arrays one INSERT takes.
type eventBatch struct{ ids, types, data []string }

// validateEvents fills in ids and checks types and JSON. A batch that names
// one id twice is refused whole (ErrAlreadyExists), as a repeat of a stored
// id is.
func validateEvents(sessionID string, events []store.NewEvent) (eventBatch, error) {
	b := eventBatch{ids: make([]string, len(events)), types: make([]string, len(events)), data: make([]string, len(events))}
	seen := make(map[string]int, len(events))
	for i, ev := range events {
		id := ev.ID
		if id == "" {
			id = ids.New("sevt")
		}
		if ev.Type == "" {
			return b, fmt.Errorf("session %s: event %d (%s): Type is empty: %w", sessionID, i, id, store.ErrInvalid)
		}
		data, err := objectArg(fmt.Sprintf("session %s: event %d (%s): Data", sessionID, i, id), ev.Data)
		if err != nil {
			return b, err
		}
		if j, dup := seen[id]; dup {
			return b, fmt.Errorf("session %s: events %d and %d share id %q: %w", sessionID, j, i, id, store.ErrAlreadyExists)
		}
		seen[id] = i
		b.ids[i], b.types[i], b.data[i] = id, ev.Type, data
	}
	return b, nil
}

// AppendEvents advances the session's last_seq by the whole batch (the
// UPDATE takes the session row's lock, so concurrent appenders queue) and
// inserts the batch with the Seq range it reserved, in one transaction.
func (s *Store) AppendEvents(ctx context.Context, sessionID string, events []store.NewEvent) ([]store.SessionEvent, error) {
	b, err := validateEvents(sessionID, events)
	if err != nil {
		return nil, err
	}
	var out []store.SessionEvent
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		out, err = s.appendEventsTx(ctx, tx, s.clock(), sessionID, b)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// appendEventsTx appends one session's validated events within tx.
func (s *Store) appendEventsTx(ctx context.Context, tx pgx.Tx, now time.Time, sessionID string, b eventBatch) ([]store.SessionEvent, error) {
	n := int64(len(b.ids))
	var last int64
	err := tx.QueryRow(ctx, `UPDATE managed_sessions SET last_seq = last_seq + $2 WHERE id = $1 RETURNING last_seq`,
		sessionID, n).Scan(&last)
	if err != nil {
		return nil, mapErr("append events to session "+sessionID, err)
	}
	out := make([]store.SessionEvent, n)
	if n == 0 {
		return out, nil
	}
	first := last - n + 1
	seqs := make([]int64, n)
	for i := range seqs {
		seqs[i] = first + int64(i)
		out[i] = store.SessionEvent{SessionID: sessionID, Seq: seqs[i], ID: b.ids[i], Type: b.types[i],
			Data: []byte(b.data[i]), CreatedAt: now}
	}
	_, err = tx.Exec(ctx, `INSERT INTO session_events (session_id, seq, id, type, data, created_at)
		SELECT $1, u.seq, u.id, u.type, u.data::json, $6
		FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[]) AS u(seq, id, type, data)`,
		sessionID, seqs, b.ids, b.types, b.data, now)
	if isUniqueViolation(err) {
		return nil, fmt.Errorf("append events to session %s: an event id is already stored: %w", sessionID, store.ErrAlreadyExists)
	}
	if err != nil {
		return nil, mapErr("append events to session "+sessionID, err)
	}
	return out, nil
}

// ListEvents returns a session's events in ascending Seq. An unknown
// session is ErrNotFound, a session without (matching) events an empty
// slice.
func (s *Store) ListEvents(ctx context.Context, p store.ListEventsParams) ([]store.SessionEvent, error) {
	var limit *int
	if p.Limit > 0 {
		limit = &p.Limit
	}
	types := p.Types
	if types == nil {
		types = []string{}
	}
	rows, err := s.pool.Query(ctx, `SELECT `+eventCols+` FROM session_events
		WHERE session_id = $1 AND seq > $2 AND ($3::bigint <= 0 OR seq < $3)
		  AND (cardinality($4::text[]) = 0 OR type = ANY($4))
		ORDER BY seq LIMIT $5`, p.SessionID, p.AfterSeq, p.BeforeSeq, types, limit)
	if err != nil {
		return nil, mapErr("list events of session "+p.SessionID, err)
	}
	out, err := collect(rows, "events", scanEvent)
	if err != nil || len(out) > 0 {
		return out, err
	}
	if _, err := s.LastEventSeq(ctx, p.SessionID); err != nil {
		return nil, err
	}
	return out, nil
}

// GetEvent returns the session's event with that id or ErrNotFound.
func (s *Store) GetEvent(ctx context.Context, sessionID, eventID string) (*store.SessionEvent, error) {
	ev, err := scanEvent(s.pool.QueryRow(ctx, `SELECT `+eventCols+` FROM session_events
		WHERE session_id = $1 AND id = $2`, sessionID, eventID))
	if err != nil {
		return nil, mapErr(fmt.Sprintf("session %s: event %s", sessionID, eventID), err)
	}
	return &ev, nil
}

// LastEventSeq reads the session's counter, which equals its newest Seq
// because Seq is dense.
func (s *Store) LastEventSeq(ctx context.Context, sessionID string) (int64, error) {
	var last int64
	err := s.pool.QueryRow(ctx, `SELECT last_seq FROM managed_sessions WHERE id = $1`, sessionID).Scan(&last)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("session %s: %w", sessionID, store.ErrNotFound)
	}
	if err != nil {
		return 0, mapErr("last event of session "+sessionID, err)
	}
	return last, nil
}
