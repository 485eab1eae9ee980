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
// ops[i] is the op journal write stored with event i (store.EventOp);
// ops is nil when no event carries one.
type eventBatch struct {
	ids, types, data []string
	ops              []*opWrite
}

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
		if ev.Op != nil {
			op, err := validateEventOp(sessionID, ev.Op)
			if err != nil {
				return b, fmt.Errorf("session %s: event %d (%s): %w", sessionID, i, id, err)
			}
			if b.ops == nil {
				b.ops = make([]*opWrite, len(events))
			}
			b.ops[i] = op
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

// appendEventsTx appends one session's validated events within tx. The
// UPDATE advances message_count by the whole batch (taking the session
// row's lock, so concurrent appenders queue) and moves the version once:
// an append is one modification (seed 004).
func (s *Store) appendEventsTx(ctx context.Context, tx pgx.Tx, now time.Time, sessionID string, b eventBatch) ([]store.SessionEvent, error) {
	n := int64(len(b.ids))
	var (
		last     int64
		branchOf string
	)
	err := tx.QueryRow(ctx, `UPDATE sessions SET message_count = message_count + $2, version = version + 1,
		updated_at = $3 WHERE id = $1 AND kind = 'managed' RETURNING message_count, branch_of`,
		sessionID, n, now).Scan(&last, &branchOf)
	if err != nil {
		return nil, mapErr("append events to session "+sessionID, err)
	}
	if branchOf != "" {
		return nil, fmt.Errorf("session %s is an abandoned branch of %s and takes no events: %w", sessionID, branchOf, store.ErrConflict)
	}
	return s.insertEvents(ctx, tx, now, sessionID, last-n, b)
}

// insertEvents inserts b as the session's messages last+1, last+2, …
// (the caller has advanced message_count).
func (s *Store) insertEvents(ctx context.Context, tx pgx.Tx, now time.Time, sessionID string, last int64, b eventBatch) ([]store.SessionEvent, error) {
	n := int64(len(b.ids))
	out := make([]store.SessionEvent, n)
	if n == 0 {
		return out, nil
	}
	for _, typ := range b.types {
		if typ == store.EventUserInterrupt {
			// The flag is the durable fact of the interrupt (seed 004),
			// written with the event.
			if _, err := tx.Exec(ctx, `UPDATE sessions SET interrupt_set = true, interrupt_reason = $2,
				interrupt_set_at = $3 WHERE id = $1`, sessionID, store.EventUserInterrupt, now); err != nil {
				return nil, mapErr("set interrupt flag of session "+sessionID, err)
			}
			break
		}
	}
	seqs := make([]int64, n)
	for i := range seqs {
		seqs[i] = last + 1 + int64(i)
		out[i] = store.SessionEvent{SessionID: sessionID, Seq: seqs[i], ID: b.ids[i], Type: b.types[i],
			Data: []byte(b.data[i]), CreatedAt: now}
	}
	_, err := tx.Exec(ctx, `INSERT INTO messages (session_id, seq, event_id, role, content, created_at)
		SELECT $1, u.seq, u.id, u.type, u.data::json, $6
		FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[]) AS u(seq, id, type, data)`,
		sessionID, seqs, b.ids, b.types, b.data, now)
	if isUniqueViolation(err) {
		return nil, fmt.Errorf("append events to session %s: an event id is already stored: %w", sessionID, store.ErrAlreadyExists)
	}
	if err != nil {
		return nil, mapErr("append events to session "+sessionID, err)
	}
	if err := writeEventOps(ctx, tx, now, sessionID, b); err != nil {
		return nil, err
	}
	if err := s.enqueueSessionWebhooks(ctx, tx, sessionID, out); err != nil {
		return nil, err
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
	rows, err := s.pool.Query(ctx, `SELECT `+eventCols+` FROM messages
		WHERE session_id = $1 AND seq > $2 AND ($3::bigint <= 0 OR seq < $3)
		  AND (cardinality($4::text[]) = 0 OR role = ANY($4))
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
	ev, err := scanEvent(s.pool.QueryRow(ctx, `SELECT `+eventCols+` FROM messages
		WHERE session_id = $1 AND event_id = $2 AND event_id <> ''`, sessionID, eventID))
	if err != nil {
		return nil, mapErr(fmt.Sprintf("session %s: event %s", sessionID, eventID), err)
	}
	return &ev, nil
}

// LastEventSeq reads the session's counter, which equals its newest Seq
// because Seq is dense.
func (s *Store) LastEventSeq(ctx context.Context, sessionID string) (int64, error) {
	var last int64
	err := s.pool.QueryRow(ctx, `SELECT message_count FROM sessions WHERE id = $1 AND kind = 'managed'`, sessionID).Scan(&last)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("session %s: %w", sessionID, store.ErrNotFound)
	}
	if err != nil {
		return 0, mapErr("last event of session "+sessionID, err)
	}
	return last, nil
}
