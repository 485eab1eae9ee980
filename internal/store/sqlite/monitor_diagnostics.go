package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// GetDiagnosticState implements store.MonitorStore.
func (s *Store) GetDiagnosticState(ctx context.Context, ticketID string) (*store.DiagnosticState, error) {
	d, err := scanDiagnostic(s.read.QueryRowContext(ctx, `SELECT `+diagnosticCols+` FROM diagnostic_states
		WHERE ticket_id = ?`, ticketID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("ticket %q: %w", ticketID, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get diagnostic state of ticket %q: %w", ticketID, err)
	}
	return d, nil
}

// ClaimDiagnosticSpawn implements store.MonitorStore. The claim is one
// UPDATE whose WHERE is every safeguard; the task insert shares its
// transaction, so a claim never exists without its task or the reverse.
// On a refusal the state is read in the same transaction to say why.
func (s *Store) ClaimDiagnosticSpawn(ctx context.Context, p store.ClaimDiagnosticParams) (store.DiagnosticClaim, error) {
	if err := p.Rules.Check(); err != nil {
		return store.DiagnosticClaim{}, err
	}
	if p.Task == nil || p.Now.IsZero() {
		return store.DiagnosticClaim{}, fmt.Errorf("claim diagnostic of ticket %q: need Task and Now: %w", p.TicketID, store.ErrInvalid)
	}
	task := *p.Task
	if task.ID == "" {
		task.ID = ids.New("tsk")
	}
	task.Kind, task.TicketID, task.Status = store.TaskDiagnostic, p.TicketID, store.TaskPending
	now := orNow(p.Now, p.Now)
	cutoff := now.Add(-p.Rules.Cooldown)
	var out store.DiagnosticClaim
	err := s.inTx(ctx, func(tx *wtx) error {
		d, err := scanDiagnostic(tx.QueryRowContext(ctx, `UPDATE diagnostic_states SET attempts = attempts + 1,
			last_spawned_at = ?1, pending_task_id = ?2, version = version + 1, updated_at = ?1
			WHERE ticket_id = ?3 AND pending_task_id = '' AND human_review = 0
			  AND attempts < ?4 AND consecutive_failures < ?5
			  AND (last_spawned_at IS NULL OR last_spawned_at <= ?6)
			  AND (?7 = '' OR EXISTS (SELECT 1 FROM terminations
			       WHERE sandbox_id = ?7 AND finished_at IS NOT NULL AND stop_error = ''))
			RETURNING `+diagnosticCols,
			micros(now), task.ID, p.TicketID, p.Rules.MaxPerWorkflow, p.Rules.MaxConsecutiveFailures, micros(cutoff), p.CloneFrom))
		if errors.Is(err, sql.ErrNoRows) {
			d, err = scanDiagnostic(tx.QueryRowContext(ctx, `SELECT `+diagnosticCols+` FROM diagnostic_states
				WHERE ticket_id = ?`, p.TicketID))
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("ticket %q: %w", p.TicketID, store.ErrNotFound)
			}
			if err != nil {
				return fmt.Errorf("sqlite: read diagnostic state of ticket %q: %w", p.TicketID, err)
			}
			ready, err := s.cloneReady(ctx, tx, p.CloneFrom)
			if err != nil {
				return err
			}
			refusal, retry := d.Refusal(now, p.Rules, ready)
			out = store.DiagnosticClaim{Refusal: refusal, State: *d, RetryAt: retry}
			return nil
		}
		if err != nil {
			return fmt.Errorf("sqlite: claim diagnostic of ticket %q: %w", p.TicketID, err)
		}
		t, err := s.createTaskTx(ctx, tx, &task)
		if err != nil {
			return err
		}
		out = store.DiagnosticClaim{OK: true, State: *d, Task: t}
		return nil
	})
	if err != nil {
		return store.DiagnosticClaim{}, err
	}
	return out, nil
}

// RecordDiagnosticOutcome implements store.MonitorStore: conditional on the
// pending task, so an outcome counts once.
func (s *Store) RecordDiagnosticOutcome(ctx context.Context, p store.DiagnosticOutcomeParams) (*store.DiagnosticState, error) {
	if p.TaskID == "" {
		return nil, fmt.Errorf("diagnostic outcome of ticket %q: empty task id: %w", p.TicketID, store.ErrInvalid)
	}
	at := orNow(p.At, s.timestamp())
	var out *store.DiagnosticState
	err := s.inTx(ctx, func(tx *wtx) error {
		var err error
		out, err = scanDiagnostic(tx.QueryRowContext(ctx, `UPDATE diagnostic_states SET pending_task_id = '',
			completed = completed + CASE WHEN ?1 THEN 1 ELSE 0 END,
			consecutive_failures = CASE WHEN ?1 THEN 0 ELSE consecutive_failures + 1 END,
			version = version + 1, updated_at = ?2
			WHERE ticket_id = ?3 AND pending_task_id = ?4 RETURNING `+diagnosticCols,
			p.Success, micros(at), p.TicketID, p.TaskID))
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var pending string
		err = tx.QueryRowContext(ctx, `SELECT pending_task_id FROM diagnostic_states WHERE ticket_id = ?`, p.TicketID).Scan(&pending)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("ticket %q: %w", p.TicketID, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("sqlite: read diagnostic state of ticket %q: %w", p.TicketID, err)
		}
		return fmt.Errorf("ticket %q: diagnostic %q is not the pending one (pending %q): %w",
			p.TicketID, p.TaskID, pending, store.ErrConflict)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// MarkHumanReview implements store.MonitorStore; the first reason and time
// are kept.
func (s *Store) MarkHumanReview(ctx context.Context, p store.MarkHumanReviewParams) (*store.DiagnosticState, error) {
	at := orNow(p.At, s.timestamp())
	var out *store.DiagnosticState
	err := s.inTx(ctx, func(tx *wtx) error {
		var err error
		out, err = scanDiagnostic(tx.QueryRowContext(ctx, `UPDATE diagnostic_states SET
			human_review_reason = CASE WHEN human_review = 1 THEN human_review_reason ELSE ?1 END,
			human_review_at = CASE WHEN human_review = 1 THEN human_review_at ELSE ?2 END,
			version = version + CASE WHEN human_review = 1 THEN 0 ELSE 1 END,
			updated_at = CASE WHEN human_review = 1 THEN updated_at ELSE ?2 END,
			human_review = 1
			WHERE ticket_id = ?3 RETURNING `+diagnosticCols, p.Reason, micros(at), p.TicketID))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("ticket %q: %w", p.TicketID, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("sqlite: mark ticket %q for human review: %w", p.TicketID, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// cloneReady is the clone_ready safeguard: the sandbox to clone has a
// finished termination that stopped it.
func (s *Store) cloneReady(ctx context.Context, tx *wtx, sandboxID string) (bool, error) {
	if sandboxID == "" {
		return true, nil
	}
	var n int
	err := tx.QueryRowContext(ctx, `SELECT count(*) FROM terminations
		WHERE sandbox_id = ? AND finished_at IS NOT NULL AND stop_error = ''`, sandboxID).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("sqlite: read termination of sandbox %q: %w", sandboxID, err)
	}
	return n > 0, nil
}
