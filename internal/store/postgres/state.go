package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// checkVersion returns a StaleStateError when expected is set and differs.
func checkVersion(id string, expected *int64, current int64) error {
	if expected != nil && *expected != current {
		return &store.StaleStateError{SessionID: id, ExpectedVersion: *expected, CurrentVersion: current}
	}
	return nil
}

// SaveState overwrites the writable state under the row lock, optionally
// writing a checkpoint and moving the pointer in the same transaction.
func (s *Store) SaveState(ctx context.Context, p store.SaveStateParams) (*store.Session, error) {
	if _, err := validateState(p.State); err != nil {
		return nil, err
	}
	op := fmt.Sprintf("save state of session %s", p.SessionID)
	var out *store.Session
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		cur, err := getSession(ctx, tx, p.SessionID, true)
		if err != nil {
			return err
		}
		if err := checkVersion(p.SessionID, p.ExpectedVersion, cur.Version); err != nil {
			return err
		}
		now := s.clock()
		var ptr pointer
		if p.Checkpoint != nil {
			ptr = pointer{id: p.Checkpoint.ID, at: &now, source: string(store.CheckpointSourceSave)}
			if ptr.id == "" {
				ptr.id = ids.New("cp")
			}
		}
		r, err := writeState(ctx, tx, p.SessionID, p.State, cur.messageCount, ptr, now)
		if err != nil {
			return err
		}
		if p.Checkpoint != nil {
			meta := *p.Checkpoint
			meta.ID = ptr.id
			if _, err := insertCheckpoint(ctx, tx, r, meta, store.CheckpointSourceSave, now); err != nil {
				return err
			}
		}
		out = &r.Session
		return nil
	})
	if err != nil {
		return nil, mapErr(op, err)
	}
	return out, nil
}

// MergeCustomState merges patch's top-level keys into the custom state under
// the row lock (null deletes a key) and returns the new version.
func (s *Store) MergeCustomState(ctx context.Context, id string, patch json.RawMessage) (int64, error) {
	if _, err := decodeObject("patch", patch); err != nil {
		return 0, err
	}
	var version int64
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var custom []byte
		if err := tx.QueryRow(ctx, "SELECT custom_state FROM sessions WHERE id = $1 FOR NO KEY UPDATE", id).Scan(&custom); err != nil {
			return err
		}
		merged, err := mergeObject(custom, patch)
		if err != nil {
			return err
		}
		return tx.QueryRow(ctx, `UPDATE sessions SET custom_state = $2, version = version + 1, updated_at = $3
			WHERE id = $1 RETURNING version`, id, string(merged), s.clock()).Scan(&version)
	})
	if err != nil {
		return 0, mapErr(fmt.Sprintf("merge custom state of session %s", id), err)
	}
	return version, nil
}

// UpdateStatus sets the status unconditionally and returns the new version.
func (s *Store) UpdateStatus(ctx context.Context, p store.UpdateStatusParams) (int64, error) {
	if !p.Status.Valid() {
		return 0, fmt.Errorf("update status: %q is not a session status: %w", p.Status, store.ErrInvalid)
	}
	ictx, err := jsonArg("InterruptContext", p.InterruptContext)
	if err != nil {
		return 0, err
	}
	var version int64
	err = s.pool.QueryRow(ctx, `UPDATE sessions SET status = $2, error = coalesce($3, error),
		interrupt_context = coalesce($4::json, interrupt_context),
		version = version + 1, updated_at = $5
		WHERE id = $1 RETURNING version`, p.SessionID, string(p.Status), p.Error, ictx, s.clock()).Scan(&version)
	if err != nil {
		return 0, mapErr(fmt.Sprintf("update status of session %s", p.SessionID), err)
	}
	return version, nil
}

// CompareAndSetStatus moves the status only from one of Expected (and, when
// set, at ExpectedVersion). A mismatch is reported in the result, not as an
// error; the row lock makes the check and the write one step.
func (s *Store) CompareAndSetStatus(ctx context.Context, p store.CompareAndSetStatusParams) (store.CASResult, error) {
	if len(p.Expected) == 0 {
		return store.CASResult{}, fmt.Errorf("compare and set status: Expected is empty: %w", store.ErrInvalid)
	}
	if !p.New.Valid() {
		return store.CASResult{}, fmt.Errorf("compare and set status: %q is not a session status: %w", p.New, store.ErrInvalid)
	}
	ictx, err := jsonArg("InterruptContext", p.InterruptContext)
	if err != nil {
		return store.CASResult{}, err
	}
	// One statement: cur takes the row lock (waiting out a concurrent writer
	// and then reading the row it left), upd writes only when cur matched.
	// Holding the lock for one statement instead of a multi-round-trip
	// transaction is what keeps CAS throughput up under contention.
	var (
		status     string
		version    int64
		newVersion *int64
	)
	err = s.pool.QueryRow(ctx, `WITH cur AS (
			SELECT status, version FROM sessions WHERE id = $1 FOR NO KEY UPDATE),
		upd AS (
			UPDATE sessions SET status = $4, error = coalesce($5, error),
				interrupt_context = coalesce($6::json, interrupt_context),
				version = sessions.version + 1, updated_at = $7
			FROM cur WHERE sessions.id = $1 AND cur.status = ANY($2::text[])
				AND ($3::bigint IS NULL OR cur.version = $3)
			RETURNING sessions.version)
		SELECT cur.status, cur.version, (SELECT version FROM upd) FROM cur`,
		p.SessionID, statusStrings(p.Expected), p.ExpectedVersion, string(p.New), p.Error, ictx, s.clock(),
	).Scan(&status, &version, &newVersion)
	if err != nil {
		return store.CASResult{}, mapErr(fmt.Sprintf("compare and set status of session %s", p.SessionID), err)
	}
	if newVersion == nil {
		return store.CASResult{CurrentStatus: store.SessionStatus(status), CurrentVersion: version}, nil
	}
	return store.CASResult{OK: true, NewVersion: *newVersion, CurrentStatus: p.New, CurrentVersion: *newVersion}, nil
}

func statusStrings(set []store.SessionStatus) []string {
	out := make([]string, len(set))
	for i, s := range set {
		out[i] = string(s)
	}
	return out
}

// IncrementStepCount adds one to the step count and returns the new count.
func (s *Store) IncrementStepCount(ctx context.Context, id string) (int64, error) {
	return s.increment(ctx, id, "step_count")
}

// IncrementResumeCount adds one to the resume count and returns the new count.
func (s *Store) IncrementResumeCount(ctx context.Context, id string) (int64, error) {
	return s.increment(ctx, id, "resume_count")
}

// increment bumps a counter column; col is one of two constants above.
func (s *Store) increment(ctx context.Context, id, col string) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `UPDATE sessions SET `+col+` = `+col+` + 1, version = version + 1, updated_at = $2
		WHERE id = $1 RETURNING `+col, id, s.clock()).Scan(&n)
	if err != nil {
		return 0, mapErr(fmt.Sprintf("increment %s of session %s", col, id), err)
	}
	return n, nil
}
