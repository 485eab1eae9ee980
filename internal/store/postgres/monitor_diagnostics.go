package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// GetDiagnosticState implements store.MonitorStore.
func (s *Store) GetDiagnosticState(ctx context.Context, ticketID string) (*store.DiagnosticState, error) {
	d, err := scanDiagnostic(s.pool.QueryRow(ctx, `SELECT `+diagnosticCols+` FROM diagnostic_states
		WHERE ticket_id = $1`, ticketID))
	if err != nil {
		return nil, mapErr("diagnostic state of ticket "+ticketID, err)
	}
	return d, nil
}

// ClaimDiagnosticSpawn implements store.MonitorStore. The claim is one
// UPDATE whose WHERE is every safeguard; under READ COMMITTED a claimer
// that waited on the row lock re-checks the WHERE against the winner's
// committed row (pending set) and matches nothing. The task insert shares
// the transaction, so a claim never exists without its task or the
// reverse. On a refusal the state is read in the same transaction to say
// why.
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
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		d, err := scanDiagnostic(tx.QueryRow(ctx, `UPDATE diagnostic_states SET attempts = attempts + 1,
			last_spawned_at = $1, pending_task_id = $2, version = version + 1, updated_at = $1
			WHERE ticket_id = $3 AND pending_task_id = '' AND NOT human_review
			  AND attempts < $4 AND consecutive_failures < $5
			  AND (last_spawned_at IS NULL OR last_spawned_at <= $6)
			  AND ($7 = '' OR EXISTS (SELECT 1 FROM terminations
			       WHERE sandbox_id = $7 AND finished_at IS NOT NULL AND stop_error = ''))
			RETURNING `+diagnosticCols,
			now, task.ID, p.TicketID, p.Rules.MaxPerWorkflow, p.Rules.MaxConsecutiveFailures, cutoff, p.CloneFrom))
		if errors.Is(err, pgx.ErrNoRows) {
			d, err = scanDiagnostic(tx.QueryRow(ctx, `SELECT `+diagnosticCols+` FROM diagnostic_states
				WHERE ticket_id = $1`, p.TicketID))
			if err != nil {
				return mapErr("diagnostic state of ticket "+p.TicketID, err)
			}
			ready, err := cloneReady(ctx, tx, p.CloneFrom)
			if err != nil {
				return err
			}
			refusal, retry := d.Refusal(now, p.Rules, ready)
			out = store.DiagnosticClaim{Refusal: refusal, State: *d, RetryAt: retry}
			return nil
		}
		if err != nil {
			return mapErr("claim diagnostic of ticket "+p.TicketID, err)
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
	at := orNow(p.At, s.clock())
	var out *store.DiagnosticState
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = scanDiagnostic(tx.QueryRow(ctx, `UPDATE diagnostic_states SET pending_task_id = '',
			completed = completed + CASE WHEN $1 THEN 1 ELSE 0 END,
			consecutive_failures = CASE WHEN $1 THEN 0 ELSE consecutive_failures + 1 END,
			version = version + 1, updated_at = $2
			WHERE ticket_id = $3 AND pending_task_id = $4 RETURNING `+diagnosticCols,
			p.Success, at, p.TicketID, p.TaskID))
		if !errors.Is(err, pgx.ErrNoRows) {
			return mapErr("record diagnostic outcome of ticket "+p.TicketID, err)
		}
		var pending string
		if err := tx.QueryRow(ctx, `SELECT pending_task_id FROM diagnostic_states WHERE ticket_id = $1`,
			p.TicketID).Scan(&pending); err != nil {
			return mapErr("diagnostic state of ticket "+p.TicketID, err)
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
	d, err := scanDiagnostic(s.pool.QueryRow(ctx, `UPDATE diagnostic_states SET
		human_review_reason = CASE WHEN human_review THEN human_review_reason ELSE $1 END,
		human_review_at = CASE WHEN human_review THEN human_review_at ELSE $2 END,
		version = version + CASE WHEN human_review THEN 0 ELSE 1 END,
		updated_at = CASE WHEN human_review THEN updated_at ELSE $2 END,
		human_review = true
		WHERE ticket_id = $3 RETURNING `+diagnosticCols, p.Reason, orNow(p.At, s.clock()), p.TicketID))
	if err != nil {
		return nil, mapErr("mark ticket "+p.TicketID+" for human review", err)
	}
	return d, nil
}

// cloneReady is the clone_ready safeguard: the sandbox to clone has a
// finished termination that stopped it.
func cloneReady(ctx context.Context, tx pgx.Tx, sandboxID string) (bool, error) {
	if sandboxID == "" {
		return true, nil
	}
	var ok bool
	err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM terminations
		WHERE sandbox_id = $1 AND finished_at IS NOT NULL AND stop_error = '')`, sandboxID).Scan(&ok)
	if err != nil {
		return false, mapErr("termination of sandbox "+sandboxID, err)
	}
	return ok, nil
}
