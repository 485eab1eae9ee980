package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// newEventRow is one validated event of a batch.
type newEventRow struct {
	id, typ, data string
	op            *opWrite // the op journal write stored with it (store.EventOp)
}

// validateEvents fills in ids and checks types and JSON. A batch that names
// one id twice is refused whole (ErrAlreadyExists), as a repeat of a stored
// id is.
func validateEvents(sessionID string, events []store.NewEvent) ([]newEventRow, error) {
	out := make([]newEventRow, len(events))
	seen := make(map[string]int, len(events))
	for i, ev := range events {
		id := ev.ID
		if id == "" {
			id = ids.New("sevt")
		}
		if ev.Type == "" {
			return nil, fmt.Errorf("session %s: event %d (%s): Type is empty: %w", sessionID, i, id, store.ErrInvalid)
		}
		data, err := jsonObject(fmt.Sprintf("session %s: event %d (%s): Data", sessionID, i, id), ev.Data, "{}")
		if err != nil {
			return nil, err
		}
		if j, dup := seen[id]; dup {
			return nil, fmt.Errorf("session %s: events %d and %d share id %q: %w", sessionID, j, i, id, store.ErrAlreadyExists)
		}
		op, err := validateEventOp(sessionID, ev.Op)
		if err != nil {
			return nil, fmt.Errorf("session %s: event %d (%s): %w", sessionID, i, id, err)
		}
		seen[id] = i
		out[i] = newEventRow{id: id, typ: ev.Type, data: data, op: op}
	}
	return out, nil
}

// AppendEvents implements store.ManagedStore. The session's last_seq
// counter is advanced by the whole batch first; SQLite's single writer
// makes the batch's Seq range contiguous and the whole append atomic.
func (s *Store) AppendEvents(ctx context.Context, sessionID string, events []store.NewEvent) ([]store.SessionEvent, error) {
	rows, err := validateEvents(sessionID, events)
	if err != nil {
		return nil, err
	}
	var out []store.SessionEvent
	err = s.inTx(ctx, func(tx *wtx) error {
		out, _, err = s.appendEventsTx(ctx, tx, s.timestamp(), sessionID, rows)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// appendEventsTx appends one session's validated events within tx: the
// session's version moves once (an append is one modification, seed 004)
// and the events take the Seqs after its last message. It returns them and
// the session's last Seq after them.
func (s *Store) appendEventsTx(ctx context.Context, tx *wtx, now time.Time, sessionID string, rows []newEventRow) ([]store.SessionEvent, int64, error) {
	evs, last, _, err := s.advanceAndInsert(ctx, tx, now, sessionID, rows, false)
	return evs, last, err
}

// advanceAndInsert is appendEventsTx; with full it also returns the session
// row as the version update left it (what a checkpoint snapshots), read by
// the same statement.
func (s *Store) advanceAndInsert(ctx context.Context, tx *wtx, now time.Time, sessionID string, rows []newEventRow, full bool) ([]store.SessionEvent, int64, *store.Session, error) {
	var (
		branchOf string
		last     int64
		sess     *store.Session
		err      error
	)
	const update = `UPDATE sessions SET version = version + 1, updated_at = ? WHERE id = ? AND kind = 'managed'
		RETURNING branch_of, (SELECT COALESCE(MAX(seq), 0) FROM messages WHERE session_id = sessions.id)`
	row := tx.QueryRowContext(ctx, update+map[bool]string{true: ", " + sessionCols}[full], micros(now), sessionID)
	if full {
		sess, err = scanSession(prefixed{row, []any{&branchOf, &last}})
	} else {
		err = row.Scan(&branchOf, &last)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return nil, 0, nil, fmt.Errorf("session %q: %w", sessionID, store.ErrNotFound)
	}
	if err != nil {
		return nil, 0, nil, fmt.Errorf("sqlite: advance events of session %q: %w", sessionID, err)
	}
	if branchOf != "" {
		return nil, 0, nil, fmt.Errorf("session %q is an abandoned branch of %q and takes no events: %w", sessionID, branchOf, store.ErrConflict)
	}
	evs, err := s.insertEventsTx(ctx, tx, now, sessionID, last, rows)
	return evs, last + int64(len(rows)), sess, err
}

// prefixed scans its first values into head, the rest as the scanner
// it is given them would (a row with columns before a scanner's).
type prefixed struct {
	r    scanner
	head []any
}

func (p prefixed) Scan(dest ...any) error { return p.r.Scan(append(p.head, dest...)...) }

// flagInterrupt sets the session's interrupt flag when rows hold a
// user.interrupt: the flag is the durable fact of the interrupt (seed
// 004), written with the event.
func flagInterrupt(ctx context.Context, tx *wtx, now time.Time, sessionID string, rows []newEventRow) error {
	for _, r := range rows {
		if r.typ != store.EventUserInterrupt {
			continue
		}
		if _, err := tx.ExecContext(ctx, `UPDATE sessions SET interrupt_set = 1, interrupt_reason = ?, interrupt_at = ?
			WHERE id = ?`, store.EventUserInterrupt, micros(now), sessionID); err != nil {
			return fmt.Errorf("sqlite: set interrupt flag of %q: %w", sessionID, err)
		}
		return nil
	}
	return nil
}

// insertEventsTx inserts rows as the session's messages last+1, last+2, ….
func (s *Store) insertEventsTx(ctx context.Context, tx *wtx, now time.Time, sessionID string, last int64, rows []newEventRow) ([]store.SessionEvent, error) {
	out := make([]store.SessionEvent, len(rows))
	if len(rows) == 0 {
		return out, nil
	}
	if err := flagInterrupt(ctx, tx, now, sessionID, rows); err != nil {
		return nil, err
	}
	ins, err := tx.PrepareContext(ctx, `INSERT INTO messages (session_id, seq, event_id, role, content, created_at)
		VALUES (?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: prepare event insert: %w", err)
	}
	defer ins.Close()
	for i, r := range rows {
		seq := last + 1 + int64(i)
		if _, err := ins.ExecContext(ctx, sessionID, seq, r.id, r.typ, r.data, micros(now)); err != nil {
			if s.drv.isUnique(err) {
				return nil, fmt.Errorf("session %q: event %q: %w", sessionID, r.id, store.ErrAlreadyExists)
			}
			return nil, fmt.Errorf("sqlite: insert event %q of session %q: %w", r.id, sessionID, err)
		}
		out[i] = store.SessionEvent{SessionID: sessionID, Seq: seq, ID: r.id, Type: r.typ,
			Data: []byte(r.data), CreatedAt: now}
	}
	if err := writeEventOpsTx(ctx, tx, now, sessionID, rows); err != nil {
		return nil, err
	}
	if err := s.enqueueSessionWebhooksTx(ctx, tx, sessionID, out); err != nil {
		return nil, err
	}
	return out, nil
}

// ListEvents implements store.ManagedStore: ascending Seq. An unknown
// session is ErrNotFound, a session without (matching) events an empty
// slice.
func (s *Store) ListEvents(ctx context.Context, p store.ListEventsParams) ([]store.SessionEvent, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	q := `SELECT ` + eventCols + ` FROM messages WHERE session_id = ? AND seq > ? AND (? <= 0 OR seq < ?)`
	args := []any{p.SessionID, p.AfterSeq, p.BeforeSeq, p.BeforeSeq}
	if len(p.Types) > 0 {
		q += ` AND role IN (?` + strings.Repeat(`, ?`, len(p.Types)-1) + `)`
		for _, t := range p.Types {
			args = append(args, t)
		}
	}
	rows, err := s.read.QueryContext(ctx, q+` ORDER BY seq LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list events of session %q: %w", p.SessionID, err)
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

// GetEvent implements store.ManagedStore.
func (s *Store) GetEvent(ctx context.Context, sessionID, eventID string) (*store.SessionEvent, error) {
	ev, err := scanEvent(s.read.QueryRowContext(ctx, `SELECT `+eventCols+` FROM messages
		WHERE session_id = ? AND event_id = ? AND event_id <> ''`, sessionID, eventID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("session %q: event %q: %w", sessionID, eventID, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get event %q of session %q: %w", eventID, sessionID, err)
	}
	return &ev, nil
}

// LastEventSeq implements store.ManagedStore: the newest Seq, read from
// the messages' primary key (Seq is dense).
func (s *Store) LastEventSeq(ctx context.Context, sessionID string) (int64, error) {
	var last int64
	err := s.read.QueryRowContext(ctx, `SELECT (SELECT COALESCE(MAX(seq), 0) FROM messages WHERE session_id = s.id)
		FROM sessions s WHERE s.id = ? AND s.kind = 'managed'`, sessionID).Scan(&last)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("session %q: %w", sessionID, store.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("sqlite: last event of session %q: %w", sessionID, err)
	}
	return last, nil
}
