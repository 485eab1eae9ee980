package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// takeStaged deletes and returns the session's staged changes in staging
// order. Reading and deleting in one statement means a change staged
// concurrently is either promoted or left staged, never silently dropped.
func takeStaged(ctx context.Context, tx pgx.Tx, sessionID string) ([]store.StagedChange, error) {
	rows, err := tx.Query(ctx, `WITH d AS (DELETE FROM staged_changes WHERE session_id = $1
			RETURNING ord, session_id, step_id, messages, state_writes, created_at)
		SELECT session_id, step_id, messages, state_writes, created_at FROM d ORDER BY ord`, sessionID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanStaged)
}

// applyStaged folds staged changes into custom state and the message list.
func applyStaged(custom json.RawMessage, msgs []store.NewMessage, staged []store.StagedChange) (json.RawMessage, []store.NewMessage, error) {
	var err error
	for _, c := range staged {
		msgs = append(msgs, c.Messages...)
		if len(c.StateWrites) > 0 {
			if custom, err = mergeObject(custom, c.StateWrites); err != nil {
				return nil, nil, fmt.Errorf("staged step %s: %w", c.StepID, err)
			}
		}
	}
	return custom, msgs, nil
}

// SaveStateAndPromoteStaging is seed 004's atomic primitive (invariant C-1):
// one transaction under the session row lock checks ExpectedVersion, writes
// State, appends AppendMessages then the staged messages, merges staged
// state writes, creates the checkpoint and moves the pointer. On a stale
// version it returns before writing, and the rollback leaves nothing behind.
func (s *Store) SaveStateAndPromoteStaging(ctx context.Context, p store.SaveAndPromoteParams) (store.SaveAndPromoteResult, error) {
	op := fmt.Sprintf("session %s: save state and promote staging", p.SessionID)
	if _, err := validateState(p.State); err != nil {
		return store.SaveAndPromoteResult{}, fmt.Errorf("%s: %w", op, err)
	}
	if _, _, err := messageArgs(p.AppendMessages); err != nil {
		return store.SaveAndPromoteResult{}, fmt.Errorf("%s: %w", op, err)
	}
	meta := p.Checkpoint
	if meta.ID == "" {
		meta.ID = ids.New("cp")
	}
	var res store.SaveAndPromoteResult
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		cur, err := getSession(ctx, tx, p.SessionID, true)
		if err != nil {
			return err
		}
		if err := checkVersion(p.SessionID, p.ExpectedVersion, cur.Version); err != nil {
			return err
		}
		staged, err := takeStaged(ctx, tx, p.SessionID)
		if err != nil {
			return err
		}
		state := p.State
		msgs := append([]store.NewMessage(nil), p.AppendMessages...)
		if state.CustomState, msgs, err = applyStaged(state.CustomState, msgs, staged); err != nil {
			return err
		}
		now := s.clock()
		if err := insertMessages(ctx, tx, p.SessionID, cur.messageCount, msgs, now); err != nil {
			return err
		}
		ptr := pointer{id: meta.ID, at: &now, source: string(store.CheckpointSourceStaging)}
		r, err := writeState(ctx, tx, p.SessionID, state, cur.messageCount+int64(len(msgs)), ptr, now)
		if err != nil {
			return err
		}
		cp, err := insertCheckpoint(ctx, tx, r, meta, store.CheckpointSourceStaging, now)
		if err != nil {
			return err
		}
		res = store.SaveAndPromoteResult{
			NewVersion:     r.Version,
			Checkpoint:     *cp,
			PromotedStages: len(staged),
			MessageCount:   r.messageCount,
		}
		return nil
	})
	if err != nil {
		return store.SaveAndPromoteResult{}, mapErr(op, err)
	}
	return res, nil
}

// PromoteStaging applies every staged change in one transaction and returns
// how many there were. With nothing staged nothing is written.
func (s *Store) PromoteStaging(ctx context.Context, sessionID string) (int, error) {
	op := fmt.Sprintf("session %s: promote staging", sessionID)
	var n int
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		cur, err := getSession(ctx, tx, sessionID, true)
		if err != nil {
			return err
		}
		staged, err := takeStaged(ctx, tx, sessionID)
		if err != nil || len(staged) == 0 {
			n = 0
			return err
		}
		custom, msgs, err := applyStaged(cur.CustomState, nil, staged)
		if err != nil {
			return err
		}
		now := s.clock()
		if err := insertMessages(ctx, tx, sessionID, cur.messageCount, msgs, now); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE sessions SET custom_state = $2, message_count = $3,
			version = version + 1, updated_at = $4 WHERE id = $1`,
			sessionID, string(custom), cur.messageCount+int64(len(msgs)), now); err != nil {
			return err
		}
		n = len(staged)
		return nil
	})
	if err != nil {
		return 0, mapErr(op, err)
	}
	return n, nil
}
