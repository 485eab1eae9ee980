package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// The issue-13 operations of Managed Agents sessions on the seed-004
// tables (see store.BranchStore): step and turn boundaries are
// checkpoints written with their events, fork copies a prefix of the log,
// rewind moves what it cuts off into an abandoned branch.

// liveRunID returns the id of the session's running run owned by owner.
func liveRunID(ctx context.Context, tx pgx.Tx, sessionID, owner string) (string, error) {
	var id string
	err := tx.QueryRow(ctx, `SELECT id`+liveRun+` AND owner = $2`, sessionID, owner).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", runRowMiss(ctx, tx, sessionID, owner)
	}
	if err != nil {
		return "", mapErr("run row of session "+sessionID, err)
	}
	return id, nil
}

// stepTx appends events (taking the session's row lock) and writes the
// checkpoint after them, naming runID and workspace.
func (s *Store) stepTx(ctx context.Context, tx pgx.Tx, sessionID string, b eventBatch, runID string, step int64, workspace string) ([]store.SessionEvent, *store.Checkpoint, error) {
	now := s.clock()
	evs, err := s.appendEventsTx(ctx, tx, now, sessionID, b)
	if err != nil {
		return nil, nil, err
	}
	cpID := ids.New("cp")
	r, err := scanSession(tx.QueryRow(ctx, `UPDATE sessions SET checkpoint_id = $2, checkpointed_at = $3,
		checkpoint_source = $4 WHERE id = $1 RETURNING `+sessionCols,
		sessionID, cpID, now, string(store.CheckpointSourceStep)))
	if err != nil {
		return nil, nil, mapErr("session "+sessionID+": move checkpoint pointer", err)
	}
	cp, err := insertCheckpoint(ctx, tx, r, store.CheckpointMeta{ID: cpID, StepCount: step, RunID: runID, Workspace: workspace},
		store.CheckpointSourceStep, now)
	if err != nil {
		return nil, nil, err
	}
	return evs, cp, nil
}

// CommitStep implements store.BranchStore.
func (s *Store) CommitStep(ctx context.Context, p store.StepCommit) ([]store.SessionEvent, *store.Checkpoint, error) {
	b, err := validateEvents(p.SessionID, p.Events)
	if err != nil {
		return nil, nil, err
	}
	var (
		evs []store.SessionEvent
		cp  *store.Checkpoint
	)
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		runID, err := liveRunID(ctx, tx, p.SessionID, p.Owner)
		if err != nil {
			return err
		}
		evs, cp, err = s.stepTx(ctx, tx, p.SessionID, b, runID, p.Step, p.Workspace)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return evs, cp, nil
}

// EndTurn implements store.BranchStore.
func (s *Store) EndTurn(ctx context.Context, p store.EndTurn) ([]store.SessionEvent, *store.Checkpoint, error) {
	if !terminal(p.Status) {
		return nil, nil, fmt.Errorf("end turn of session %s: status %q is not an end status: %w", p.SessionID, p.Status, store.ErrInvalid)
	}
	b, err := validateEvents(p.SessionID, p.Events)
	if err != nil {
		return nil, nil, err
	}
	stopReason, err := jsonArg("session "+p.SessionID+": StopReason", nullToNil(p.StopReason))
	if err != nil {
		return nil, nil, err
	}
	usage, err := jsonArg("run usage", nullToNil(p.Usage))
	if err != nil {
		return nil, nil, err
	}
	sessionUsage, err := jsonArg("session "+p.SessionID+": usage", nullToNil(p.SessionUsage))
	if err != nil {
		return nil, nil, err
	}
	var (
		evs []store.SessionEvent
		cp  *store.Checkpoint
	)
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		runID, err := liveRunID(ctx, tx, p.SessionID, p.Owner)
		if err != nil {
			return err
		}
		if evs, cp, err = s.stepTx(ctx, tx, p.SessionID, b, runID, p.Step, p.Workspace); err != nil {
			return err
		}
		_, took, err := s.closeRunTx(ctx, tx, p.SessionID, p.Owner, p.Status, p.Error, usage, cp.ID)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE sessions SET stop_reason = $2, processed_seq = GREATEST(processed_seq, $3),
			usage = COALESCE($4::json, usage), active_us = active_us + $5 WHERE id = $1`,
			p.SessionID, stopReason, p.ProcessedSeq, sessionUsage, took)
		return mapErr("end turn of session "+p.SessionID, err)
	})
	if err != nil {
		return nil, nil, err
	}
	return evs, cp, nil
}

// lockManaged takes the session's row lock and returns the session and its
// last event Seq.
func (s *Store) lockManaged(ctx context.Context, tx pgx.Tx, id string) (*store.ManagedSession, int64, error) {
	var last int64
	if err := tx.QueryRow(ctx, `SELECT message_count FROM sessions WHERE id = $1 AND kind = 'managed' FOR NO KEY UPDATE`,
		id).Scan(&last); err != nil {
		return nil, 0, mapErr("session "+id, err)
	}
	m, err := getManagedSession(ctx, tx, id, s.clock())
	return m, last, err
}

// copyLog copies the events of from with Seq <= atSeq to to (ids and times
// kept) and its checkpoints within them under new ids; to's message_count
// becomes atSeq.
func copyLog(ctx context.Context, tx pgx.Tx, from, to string, atSeq int64) error {
	if _, err := tx.Exec(ctx, `INSERT INTO messages (session_id, seq, event_id, role, content, created_at)
		SELECT $2, seq, event_id, role, content, created_at FROM messages WHERE session_id = $1 AND seq <= $3`,
		from, to, atSeq); err != nil {
		return mapErr(fmt.Sprintf("copy events of %s to %s", from, to), err)
	}
	if _, err := tx.Exec(ctx, `UPDATE sessions SET message_count = $2 WHERE id = $1`, to, atSeq); err != nil {
		return mapErr("copy events to "+to, err)
	}
	rows, err := tx.Query(ctx, `SELECT id FROM checkpoints WHERE session_id = $1 AND message_count <= $2 ORDER BY ord`, from, atSeq)
	if err != nil {
		return mapErr("list checkpoints of "+from, err)
	}
	cps, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return mapErr("list checkpoints of "+from, err)
	}
	for _, id := range cps {
		if _, err := tx.Exec(ctx, `INSERT INTO checkpoints (id, session_id, step_count, message_count, version,
			run_id, source, state, metadata, workspace, created_at)
			SELECT $1, $2, step_count, message_count, version, run_id, source, state, metadata, workspace, created_at
			FROM checkpoints WHERE session_id = $3 AND id = $4`, ids.New("cp"), to, from, id); err != nil {
			return mapErr(fmt.Sprintf("copy checkpoint %s to %s", id, to), err)
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
	b, err := validateEvents(p.NewID, p.Append)
	if err != nil {
		return nil, err
	}
	var doc any
	if p.Doc != nil {
		if doc, err = objectArg("fork "+p.NewID+": Doc", p.Doc); err != nil {
			return nil, err
		}
	}
	var out *store.ManagedSession
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		src, last, err := s.lockManaged(ctx, tx, p.FromID)
		if err != nil {
			return err
		}
		if err := checkSeq(p.FromID, p.AtSeq, last); err != nil {
			return err
		}
		now := s.clock()
		tag, err := tx.Exec(ctx, `INSERT INTO sessions
			(id, tenant_id, kind, status, version, custom_state, runtime, agent_id, agent_version, environment_id,
			 doc, forked_from, forked_at_seq, workspace_seed, created_at, updated_at)
			SELECT $1, tenant_id, 'managed', 'active', 1, '{}', '{}', agent_id, agent_version, environment_id,
			 COALESCE($2::json, doc), id, $3, $4, $5, $5 FROM sessions WHERE id = $6
			ON CONFLICT DO NOTHING`, p.NewID, doc, p.AtSeq, p.Workspace, now, src.ID)
		if err != nil {
			return mapErr("create fork "+p.NewID, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("session %s: %w", p.NewID, store.ErrAlreadyExists)
		}
		// A fork is a new session: announced before the events it starts with.
		if err := s.lifecycleWebhook(ctx, tx, src.TenantID, p.NewID, store.WebhookSessionCreated, now); err != nil {
			return err
		}
		if err := copyLog(ctx, tx, src.ID, p.NewID, p.AtSeq); err != nil {
			return err
		}
		evs, _, err := s.stepTx(ctx, tx, p.NewID, b, "", 0, p.Workspace)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE sessions SET processed_seq = $2 WHERE id = $1`,
			p.NewID, min(p.ProcessedSeq, p.AtSeq+int64(len(evs)))); err != nil {
			return mapErr("fork "+p.NewID, err)
		}
		if _, err := s.createResourcesTx(ctx, tx, p.Resources); err != nil {
			return err
		}
		out, err = getManagedSession(ctx, tx, p.NewID, s.clock())
		return err
	})
	return out, err
}

// RewindManagedSession implements store.BranchStore.
func (s *Store) RewindManagedSession(ctx context.Context, p store.RewindParams) (*store.ManagedSession, *store.ManagedSession, error) {
	if p.BranchID == "" {
		p.BranchID = ids.New("sesn")
	}
	b, err := validateEvents(p.SessionID, p.Append)
	if err != nil {
		return nil, nil, err
	}
	var sess, branch *store.ManagedSession
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		cur, last, err := s.lockManaged(ctx, tx, p.SessionID)
		if err != nil {
			return err
		}
		if cur.Lineage.BranchOf != "" {
			return fmt.Errorf("session %s is an abandoned branch of %s and cannot be rewound (fork it instead): %w",
				cur.ID, cur.Lineage.BranchOf, store.ErrConflict)
		}
		var busy bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1`+liveRun+`)`, p.SessionID).Scan(&busy); err != nil {
			return mapErr("run row of session "+p.SessionID, err)
		}
		if busy {
			return fmt.Errorf("session %s is running a turn: interrupt it before a rewind: %w", p.SessionID, store.ErrConflict)
		}
		if err := checkSeq(p.SessionID, p.AtSeq, last); err != nil {
			return err
		}
		if p.AtSeq == last {
			return fmt.Errorf("session %s is at event %d already: nothing to rewind: %w", p.SessionID, last, store.ErrInvalid)
		}
		now := s.clock()
		tag, err := tx.Exec(ctx, `INSERT INTO sessions
			(id, tenant_id, kind, status, version, custom_state, runtime, agent_id, agent_version, environment_id,
			 doc, usage, processed_seq, stop_reason, active_us, branch_of, branch_at_seq, branched_at, workspace_seed,
			 forked_from, forked_at_seq, sandbox_id, created_at, updated_at)
			SELECT $1, tenant_id, 'managed', 'active', 1, '{}', '{}', agent_id, agent_version, environment_id,
			 doc, usage, processed_seq, stop_reason, active_us, id, $2, $3, $4, forked_from, forked_at_seq, sandbox_id, $3, $3
			FROM sessions WHERE id = $5 ON CONFLICT DO NOTHING`,
			p.BranchID, p.AtSeq, now, p.BranchWorkspace, p.SessionID)
		if err != nil {
			return mapErr("create branch "+p.BranchID, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("session %s: %w", p.BranchID, store.ErrAlreadyExists)
		}
		if err := copyLog(ctx, tx, p.SessionID, p.BranchID, last); err != nil {
			return err
		}
		for _, q := range []struct {
			sql  string
			args []any
		}{
			{`UPDATE runs SET session_id = $2 WHERE session_id = $1 AND turn_seq >= $3`, []any{p.SessionID, p.BranchID, p.AtSeq}},
			{`UPDATE sessions SET run_count = (SELECT COALESCE(MAX(seq), 0) FROM runs WHERE session_id = $1) WHERE id = $1`, []any{p.BranchID}},
			{`DELETE FROM messages WHERE session_id = $1 AND seq > $2`, []any{p.SessionID, p.AtSeq}},
			{`DELETE FROM checkpoints WHERE session_id = $1 AND message_count > $2`, []any{p.SessionID, p.AtSeq}},
			{`DELETE FROM ops WHERE session_id = $1 AND turn_seq >= $2`, []any{p.SessionID, p.AtSeq}},
			{`DELETE FROM stream_chunks WHERE session_id = $1 AND turn_seq >= $2`, []any{p.SessionID, p.AtSeq}},
			{`DELETE FROM partial_blocks WHERE session_id = $1 AND turn_seq >= $2`, []any{p.SessionID, p.AtSeq}},
			{`UPDATE sessions SET sandbox_id = '', workspace_seed = $3, message_count = $2, rewinds = rewinds + 1,
			  run_count = (SELECT COALESCE(MAX(seq), 0) FROM runs WHERE session_id = $1) WHERE id = $1`,
				[]any{p.SessionID, p.AtSeq, p.Workspace}},
		} {
			if _, err := tx.Exec(ctx, q.sql, q.args...); err != nil {
				return mapErr("rewind session "+p.SessionID, err)
			}
		}
		evs, _, err := s.stepTx(ctx, tx, p.SessionID, b, "", 0, p.Workspace)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE sessions SET processed_seq = $2 WHERE id = $1`,
			p.SessionID, min(p.ProcessedSeq, p.AtSeq+int64(len(evs)))); err != nil {
			return mapErr("rewind session "+p.SessionID, err)
		}
		if sess, err = getManagedSession(ctx, tx, p.SessionID, s.clock()); err != nil {
			return err
		}
		branch, err = getManagedSession(ctx, tx, p.BranchID, s.clock())
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return sess, branch, nil
}

// ListBranches implements store.BranchStore.
func (s *Store) ListBranches(ctx context.Context, sessionID string) ([]*store.ManagedSession, error) {
	now := s.clock()
	rows, err := s.pool.Query(ctx, `SELECT `+mSessionCols+mSessionFrom+`
		WHERE s.branch_of = $1 AND s.kind = 'managed' ORDER BY s.created_at, s.id COLLATE "C"`, sessionID)
	if err != nil {
		return nil, mapErr("list branches of "+sessionID, err)
	}
	out, err := collect(rows, "branches", func(r pgx.Row) (*store.ManagedSession, error) { return scanManagedSession(r, now) })
	if err != nil || len(out) > 0 {
		return out, err
	}
	if _, err := getManagedSession(ctx, s.pool, sessionID, now); err != nil {
		return nil, err
	}
	return out, nil
}

// ListWorkspaceSnapshots implements store.BranchStore.
func (s *Store) ListWorkspaceSnapshots(ctx context.Context) (map[string]bool, error) {
	rows, err := s.pool.Query(ctx, `SELECT workspace FROM checkpoints WHERE workspace <> ''
		UNION SELECT workspace_seed FROM sessions WHERE workspace_seed <> ''`)
	if err != nil {
		return nil, mapErr("list workspace snapshots", err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, mapErr("list workspace snapshots", err)
	}
	out := make(map[string]bool, len(list))
	for _, id := range list {
		out[id] = true
	}
	return out, nil
}
