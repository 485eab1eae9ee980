package sqlite

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// AppendEventsBatch implements store.ManagedStore: every session's events
// in one write transaction, so a group of appenders pays for one commit.
// Everything is validated before the transaction starts; any failure rolls
// back every session's events.
func (s *Store) AppendEventsBatch(ctx context.Context, batch map[string][]store.NewEvent) (map[string][]store.SessionEvent, error) {
	sessions := make([]string, 0, len(batch))
	for id := range batch {
		sessions = append(sessions, id)
	}
	// A fixed order makes errors (the first failing session) repeatable.
	slices.Sort(sessions)
	rows := make([][]newEventRow, len(sessions))
	for i, id := range sessions {
		r, err := validateEvents(id, batch[id])
		if err != nil {
			return nil, err
		}
		rows[i] = r
	}
	out := make(map[string][]store.SessionEvent, len(sessions))
	if len(sessions) == 0 {
		return out, nil
	}
	err := s.inTx(ctx, func(tx *wtx) error {
		now := s.timestamp()
		last, err := advanceSessions(ctx, tx, now, sessions)
		if err != nil {
			return err
		}
		var ins []any
		for i, id := range sessions {
			evs := make([]store.SessionEvent, len(rows[i]))
			first := last[id] + 1
			for j, r := range rows[i] {
				evs[j] = store.SessionEvent{SessionID: id, Seq: first + int64(j), ID: r.id, Type: r.typ,
					Data: []byte(r.data), CreatedAt: now}
				ins = append(ins, id, evs[j].Seq, r.id, r.typ, r.data, micros(now))
			}
			out[id] = evs
			if err := flagInterrupt(ctx, tx, now, id, rows[i]); err != nil {
				return err
			}
		}
		err = inChunks(len(ins)/6, func(off, n int) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO messages (session_id, seq, event_id, role, content, created_at)
				VALUES `+tuples("(?, ?, ?, ?, ?, ?)", n), ins[off*6:(off+n)*6]...)
			return err
		})
		if s.drv.isUnique(err) {
			return fmt.Errorf("append events to %d sessions: an event id is already stored in its session: %w",
				len(sessions), store.ErrAlreadyExists)
		}
		if err != nil {
			return fmt.Errorf("sqlite: insert events of %d sessions: %w", len(sessions), err)
		}
		for i, id := range sessions {
			if err := writeEventOpsTx(ctx, tx, now, id, rows[i]); err != nil {
				return err
			}
		}
		for _, id := range sessions {
			if err := s.enqueueSessionWebhooksTx(ctx, tx, id, out[id]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// advanceSessions moves each session's version once (its append is one
// modification) and returns each session's last Seq before the append; a
// session that does not exist is ErrNotFound, an abandoned branch
// ErrConflict.
func advanceSessions(ctx context.Context, tx *wtx, now time.Time, sessions []string) (map[string]int64, error) {
	last := make(map[string]int64, len(sessions))
	var branch, branchOf string
	err := inChunks(len(sessions), func(off, n int) error {
		args := make([]any, 0, n+1)
		for i := off; i < off+n; i++ {
			args = append(args, sessions[i])
		}
		args = append(args, micros(now))
		q, err := tx.QueryContext(ctx, `WITH d (id) AS (VALUES `+tuples("(?)", n)+`)
			UPDATE sessions SET version = version + 1, updated_at = ?
			FROM d WHERE sessions.id = d.id AND sessions.kind = 'managed'
			RETURNING sessions.id, sessions.branch_of,
			  (SELECT COALESCE(MAX(seq), 0) FROM messages WHERE session_id = sessions.id)`, args...)
		if err != nil {
			return err
		}
		defer q.Close()
		for q.Next() {
			var id, of string
			var seq int64
			if err := q.Scan(&id, &of, &seq); err != nil {
				return err
			}
			last[id] = seq
			if of != "" {
				branch, branchOf = id, of
			}
		}
		return q.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: advance events of %d sessions: %w", len(sessions), err)
	}
	if branch != "" {
		return nil, fmt.Errorf("session %q is an abandoned branch of %q and takes no events: %w", branch, branchOf, store.ErrConflict)
	}
	for _, id := range sessions {
		if _, ok := last[id]; !ok {
			return nil, fmt.Errorf("session %q: %w", id, store.ErrNotFound)
		}
	}
	return last, nil
}

// chunkSizes are the row counts of the multi-row statements a batch runs
// as: any size splits into a few of them, and only len(chunkSizes) texts
// per statement reach the statement cache.
var chunkSizes = [...]int{64, 16, 4, 1}

// inChunks calls fn(offset, n) over n rows in runs of chunkSizes, largest
// first, stopping at the first error.
func inChunks(total int, fn func(off, n int) error) error {
	off := 0
	for _, size := range chunkSizes {
		for total-off >= size {
			if err := fn(off, size); err != nil {
				return err
			}
			off += size
		}
	}
	return nil
}

// tuples repeats a VALUES tuple n times.
func tuples(tuple string, n int) string {
	return strings.TrimSuffix(strings.Repeat(tuple+", ", n), ", ")
}
