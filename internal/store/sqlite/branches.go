package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// The issue-13 operations of Managed Agents sessions on the seed-004
// tables (see store.BranchStore): step and turn boundaries are
// checkpoints written with their events, fork copies a prefix of the log,
// rewind moves what it cuts off into an abandoned branch.

// liveRunID returns the id of the session's running run owned by owner.
func liveRunID(ctx context.Context, tx *wtx, sessionID, owner string) (string, error) {
	var id string
	err := tx.QueryRowContext(ctx, `SELECT id`+liveRun+` AND owner = ?`, sessionID, owner).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", runRowMiss(ctx, tx, sessionID, owner)
	}
	if err != nil {
		return "", fmt.Errorf("sqlite: read run row of session %q: %w", sessionID, err)
	}
	return id, nil
}

// stepTx appends events and writes the checkpoint after them, naming
// runID and workspace; it returns both. The caller moves the session's
// pointer to the checkpoint (movePointer, or with its own update).
func (s *Store) stepTx(ctx context.Context, tx *wtx, sessionID string, rows []newEventRow, cpID, runID string, step int64, workspace string) ([]store.SessionEvent, *store.Checkpoint, error) {
	now := s.timestamp()
	evs, last, sess, err := s.advanceAndInsert(ctx, tx, now, sessionID, rows, true)
	if err != nil {
		return nil, nil, err
	}
	cp, err := s.insertCheckpoint(ctx, tx, sess, last,
		store.CheckpointMeta{ID: cpID, StepCount: step, RunID: runID, Workspace: workspace}, store.CheckpointSourceStep, now)
	if err != nil {
		return nil, nil, err
	}
	return evs, cp, nil
}

// movePointer moves the session's checkpoint pointer to cp.
func movePointer(ctx context.Context, tx *wtx, cp *store.Checkpoint) error {
	if _, err := tx.ExecContext(ctx, `UPDATE sessions SET checkpoint_id = ?, checkpointed_at = ?,
		checkpoint_source = ? WHERE id = ?`, cp.ID, micros(cp.CreatedAt), string(cp.Source), cp.SessionID); err != nil {
		return fmt.Errorf("sqlite: move checkpoint pointer of %q: %w", cp.SessionID, err)
	}
	return nil
}

// CommitStep implements store.BranchStore.
func (s *Store) CommitStep(ctx context.Context, p store.StepCommit) ([]store.SessionEvent, *store.Checkpoint, error) {
	rows, err := validateEvents(p.SessionID, p.Events)
	if err != nil {
		return nil, nil, err
	}
	var (
		evs []store.SessionEvent
		cp  *store.Checkpoint
	)
	err = s.inTx(ctx, func(tx *wtx) error {
		runID, err := liveRunID(ctx, tx, p.SessionID, p.Owner)
		if err != nil {
			return err
		}
		if evs, cp, err = s.stepTx(ctx, tx, p.SessionID, rows, "", runID, p.Step, p.Workspace); err != nil {
			return err
		}
		return movePointer(ctx, tx, cp)
	})
	if err != nil {
		return nil, nil, err
	}
	return evs, cp, nil
}

// EndTurn implements store.BranchStore.
func (s *Store) EndTurn(ctx context.Context, p store.EndTurn) ([]store.SessionEvent, *store.Checkpoint, error) {
	switch p.Status {
	case store.RunCompleted, store.RunFailed, store.RunInterrupted:
	default:
		return nil, nil, fmt.Errorf("end turn of session %s: status %q is not an end status: %w", p.SessionID, p.Status, store.ErrInvalid)
	}
	rows, err := validateEvents(p.SessionID, p.Events)
	if err != nil {
		return nil, nil, err
	}
	stopReason, err := jsonValue("session "+p.SessionID+": StopReason", nullToNil(p.StopReason))
	if err != nil {
		return nil, nil, err
	}
	usage, err := jsonValue("run usage", nullToNil(p.Usage))
	if err != nil {
		return nil, nil, err
	}
	sessionUsage, err := jsonValue("session "+p.SessionID+": usage", nullToNil(p.SessionUsage))
	if err != nil {
		return nil, nil, err
	}
	var (
		evs []store.SessionEvent
		cp  *store.Checkpoint
	)
	err = s.inTx(ctx, func(tx *wtx) error {
		// The run closes first, naming the checkpoint written after the
		// closing events; the session's pointer and totals move last, in
		// one statement.
		cpID := ids.New("cp")
		runID, took, err := s.closeRunTx(ctx, tx, p.SessionID, p.Owner, p.Status, p.Error, usage, cpID)
		if err != nil {
			return err
		}
		if evs, cp, err = s.stepTx(ctx, tx, p.SessionID, rows, cpID, runID, p.Step, p.Workspace); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE sessions SET stop_reason = ?, processed_seq = MAX(processed_seq, ?),
			usage = COALESCE(?, usage), active_us = active_us + ?,
			checkpoint_id = ?, checkpointed_at = ?, checkpoint_source = ? WHERE id = ?`,
			stopReason, p.ProcessedSeq, sessionUsage, took, cp.ID, micros(cp.CreatedAt), string(cp.Source), p.SessionID)
		if err != nil {
			return fmt.Errorf("sqlite: end turn of session %q: %w", p.SessionID, err)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return evs, cp, nil
}

// lastSeq is the session's newest message Seq (0 when none).
func lastSeq(ctx context.Context, q querier, sessionID string) (int64, error) {
	var last int64
	if err := q.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM messages WHERE session_id = ?`,
		sessionID).Scan(&last); err != nil {
		return 0, fmt.Errorf("sqlite: last event of session %q: %w", sessionID, err)
	}
	return last, nil
}

// copyLog copies the events of from with Seq <= atSeq (all when atSeq < 0)
// to to, ids and times kept, and its checkpoints within them under new ids.
func copyLog(ctx context.Context, tx *wtx, from, to string, atSeq int64) error {
	if atSeq < 0 {
		atSeq = 1<<62 - 1
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO messages (session_id, seq, event_id, role, content, created_at)
		SELECT ?, seq, event_id, role, content, created_at FROM messages WHERE session_id = ? AND seq <= ?`,
		to, from, atSeq); err != nil {
		return fmt.Errorf("sqlite: copy events of %q to %q: %w", from, to, err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT id FROM checkpoints WHERE session_id = ? AND message_count <= ? ORDER BY ord`, from, atSeq)
	if err != nil {
		return fmt.Errorf("sqlite: list checkpoints of %q: %w", from, err)
	}
	var cps []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return fmt.Errorf("sqlite: list checkpoints of %q: %w", from, err)
		}
		cps = append(cps, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sqlite: list checkpoints of %q: %w", from, err)
	}
	for _, id := range cps {
		if _, err := tx.ExecContext(ctx, `INSERT INTO checkpoints (id, session_id, step_count, message_count, version,
			run_id, source, state, metadata, workspace, created_at)
			SELECT ?, ?, step_count, message_count, version, run_id, source, state, metadata, workspace, created_at
			FROM checkpoints WHERE id = ?`, ids.New("cp"), to, id); err != nil {
			return fmt.Errorf("sqlite: copy checkpoint %q to %q: %w", id, to, err)
		}
	}
	return nil
}

// checkSeq refuses an AtSeq outside 1..last.
func checkSeq(sessionID string, atSeq, last int64) error {
	if atSeq < 1 || atSeq > last {
		return fmt.Errorf("session %s has events 1..%d; %d is not one of them: %w", sessionID, last, atSeq, store.ErrInvalid)
	}
	return nil
}

// ForkManagedSession implements store.BranchStore.
func (s *Store) ForkManagedSession(ctx context.Context, p store.ForkParams) (*store.ManagedSession, error) {
	if p.NewID == "" {
		p.NewID = ids.New("sesn")
	}
	rows, err := validateEvents(p.NewID, p.Append)
	if err != nil {
		return nil, err
	}
	var doc sql.NullString
	if p.Doc != nil {
		d, err := jsonObject("fork "+p.NewID+": Doc", p.Doc, "{}")
		if err != nil {
			return nil, err
		}
		doc = sql.NullString{String: d, Valid: true}
	}
	var out *store.ManagedSession
	err = s.inTx(ctx, func(tx *wtx) error {
		src, err := getManagedSession(ctx, tx, p.FromID, s.timestamp())
		if err != nil {
			return err
		}
		last, err := lastSeq(ctx, tx, p.FromID)
		if err != nil {
			return err
		}
		if err := checkSeq(p.FromID, p.AtSeq, last); err != nil {
			return err
		}
		now := micros(s.timestamp())
		res, err := tx.ExecContext(ctx, `INSERT INTO sessions
			(id, tenant_id, kind, status, version, custom_state, runtime, agent_id, agent_version, environment_id,
			 doc, forked_from, forked_at_seq, workspace_seed, created_at, updated_at)
			SELECT ?, tenant_id, 'managed', 'active', 1, '{}', '{}', agent_id, agent_version, environment_id,
			 COALESCE(?, doc), id, ?, ?, ?, ? FROM sessions WHERE id = ?
			ON CONFLICT DO NOTHING`,
			p.NewID, doc, p.AtSeq, p.Workspace, now, now, src.ID)
		if err != nil {
			return fmt.Errorf("sqlite: create fork %q: %w", p.NewID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("session %q: %w", p.NewID, store.ErrAlreadyExists)
		}
		// A fork is a new session: announced before the events it starts with.
		if err := s.lifecycleWebhookTx(ctx, tx, src.TenantID, p.NewID, store.WebhookSessionCreated, fromMicros(now)); err != nil {
			return err
		}
		if err := copyLog(ctx, tx, src.ID, p.NewID, p.AtSeq); err != nil {
			return err
		}
		evs, cp, err := s.stepTx(ctx, tx, p.NewID, rows, "", "", 0, p.Workspace)
		if err != nil {
			return err
		}
		if err := movePointer(ctx, tx, cp); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE sessions SET processed_seq = ? WHERE id = ?`,
			min(p.ProcessedSeq, p.AtSeq+int64(len(evs))), p.NewID); err != nil {
			return fmt.Errorf("sqlite: fork %q: %w", p.NewID, err)
		}
		if _, err := s.createResourcesTx(ctx, tx, p.Resources); err != nil {
			return err
		}
		s.reach("fork", p.NewID)
		out, err = getManagedSession(ctx, tx, p.NewID, s.timestamp())
		return err
	})
	return out, err
}

// RewindManagedSession implements store.BranchStore.
func (s *Store) RewindManagedSession(ctx context.Context, p store.RewindParams) (*store.ManagedSession, *store.ManagedSession, error) {
	if p.BranchID == "" {
		p.BranchID = ids.New("sesn")
	}
	rows, err := validateEvents(p.SessionID, p.Append)
	if err != nil {
		return nil, nil, err
	}
	var sess, branch *store.ManagedSession
	err = s.inTx(ctx, func(tx *wtx) error {
		cur, err := getManagedSession(ctx, tx, p.SessionID, s.timestamp())
		if err != nil {
			return err
		}
		if cur.Lineage.BranchOf != "" {
			return fmt.Errorf("session %s is an abandoned branch of %s and cannot be rewound (fork it instead): %w",
				cur.ID, cur.Lineage.BranchOf, store.ErrConflict)
		}
		var one int
		err = tx.QueryRowContext(ctx, `SELECT 1`+liveRun, p.SessionID).Scan(&one)
		if err == nil {
			return fmt.Errorf("session %s is running a turn: interrupt it before a rewind: %w", p.SessionID, store.ErrConflict)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlite: read run row of session %q: %w", p.SessionID, err)
		}
		last, err := lastSeq(ctx, tx, p.SessionID)
		if err != nil {
			return err
		}
		if err := checkSeq(p.SessionID, p.AtSeq, last); err != nil {
			return err
		}
		if p.AtSeq == last {
			return fmt.Errorf("session %s is at event %d already: nothing to rewind: %w", p.SessionID, last, store.ErrInvalid)
		}
		now := micros(s.timestamp())
		res, err := tx.ExecContext(ctx, `INSERT INTO sessions
			(id, tenant_id, kind, status, version, custom_state, runtime, agent_id, agent_version, environment_id,
			 doc, usage, processed_seq, stop_reason, active_us, branch_of, branch_at_seq, branched_at, workspace_seed,
			 forked_from, forked_at_seq, sandbox_id, created_at, updated_at)
			SELECT ?, tenant_id, 'managed', 'active', 1, '{}', '{}', agent_id, agent_version, environment_id,
			 doc, usage, processed_seq, stop_reason, active_us, id, ?, ?, ?, forked_from, forked_at_seq, sandbox_id, ?, ?
			FROM sessions WHERE id = ? ON CONFLICT DO NOTHING`,
			p.BranchID, p.AtSeq, now, p.BranchWorkspace, now, now, p.SessionID)
		if err != nil {
			return fmt.Errorf("sqlite: create branch %q: %w", p.BranchID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("session %q: %w", p.BranchID, store.ErrAlreadyExists)
		}
		if err := copyLog(ctx, tx, p.SessionID, p.BranchID, -1); err != nil {
			return err
		}
		for _, q := range []string{
			`UPDATE runs SET session_id = ?2 WHERE session_id = ?1 AND turn_seq >= ?3`,
			`DELETE FROM messages WHERE session_id = ?1 AND seq > ?3`,
			`DELETE FROM checkpoints WHERE session_id = ?1 AND message_count > ?3`,
			`DELETE FROM ops WHERE session_id = ?1 AND turn_seq >= ?3`,
			`DELETE FROM stream_chunks WHERE session_id = ?1 AND turn_seq >= ?3`,
			`DELETE FROM partial_blocks WHERE session_id = ?1 AND turn_seq >= ?3`,
			`UPDATE sessions SET sandbox_id = '', workspace_seed = ?4, rewinds = rewinds + 1 WHERE id = ?1`,
		} {
			if _, err := tx.ExecContext(ctx, q, p.SessionID, p.BranchID, p.AtSeq, p.Workspace); err != nil {
				return fmt.Errorf("sqlite: rewind session %q: %w", p.SessionID, err)
			}
		}
		evs, cp, err := s.stepTx(ctx, tx, p.SessionID, rows, "", "", 0, p.Workspace)
		if err != nil {
			return err
		}
		if err := movePointer(ctx, tx, cp); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE sessions SET processed_seq = ? WHERE id = ?`,
			min(p.ProcessedSeq, p.AtSeq+int64(len(evs))), p.SessionID); err != nil {
			return fmt.Errorf("sqlite: rewind session %q: %w", p.SessionID, err)
		}
		s.reach("rewind", p.SessionID)
		if sess, err = getManagedSession(ctx, tx, p.SessionID, s.timestamp()); err != nil {
			return err
		}
		branch, err = getManagedSession(ctx, tx, p.BranchID, s.timestamp())
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return sess, branch, nil
}

// ListBranches implements store.BranchStore.
func (s *Store) ListBranches(ctx context.Context, sessionID string) ([]*store.ManagedSession, error) {
	now := s.timestamp()
	rows, err := s.read.QueryContext(ctx, `SELECT `+mSessionCols+mSessionFrom+`
		WHERE s.branch_of = ? AND s.kind = 'managed' ORDER BY s.created_at, s.id`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list branches of %q: %w", sessionID, err)
	}
	out, err := collect(rows, "branches", func(r scanner) (*store.ManagedSession, error) { return scanManagedSession(r, now) })
	if err != nil || len(out) > 0 {
		return out, err
	}
	if _, err := getManagedSession(ctx, s.read, sessionID, now); err != nil {
		return nil, err
	}
	return out, nil
}

// ListWorkspaceSnapshots implements store.BranchStore.
func (s *Store) ListWorkspaceSnapshots(ctx context.Context) (map[string]bool, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT workspace FROM checkpoints WHERE workspace <> ''
		UNION SELECT workspace_seed FROM sessions WHERE workspace_seed <> ''`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list workspace snapshots: %w", err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("sqlite: list workspace snapshots: %w", err)
		}
		out[id] = true
	}
	return out, rows.Err()
}
