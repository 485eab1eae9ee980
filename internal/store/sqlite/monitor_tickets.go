package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

var _ store.MonitorStore = (*Store)(nil)

// CreateTicket implements store.MonitorStore. The ticket's diagnostic
// state row is created in the same transaction, so a later diagnostic claim
// is one conditional UPDATE of a row that always exists.
func (s *Store) CreateTicket(ctx context.Context, t *store.Ticket) (*store.Ticket, error) {
	in := *t
	if in.ID == "" {
		in.ID = ids.New("tkt")
	}
	if in.Status == "" {
		in.Status = store.TicketOpen
	}
	if !in.Status.Valid() {
		return nil, fmt.Errorf("ticket %s: status %q: want open, done or cancelled: %w", in.ID, in.Status, store.ErrInvalid)
	}
	now := s.timestamp()
	in.CreatedAt = orNow(in.CreatedAt, now)
	in.UpdatedAt = in.CreatedAt
	var meta sql.NullString
	if len(in.Metadata) > 0 {
		meta = encodeMap(in.Metadata)
	}
	var out *store.Ticket
	err := s.inTx(ctx, func(tx *wtx) error {
		var err error
		out, err = scanTicket(tx.QueryRowContext(ctx, `INSERT INTO tickets
			(id, tenant_id, title, description, metadata, status, version, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?) ON CONFLICT (id) DO NOTHING RETURNING `+ticketCols,
			in.ID, in.TenantID, in.Title, in.Description, meta, in.Status, micros(in.CreatedAt), micros(in.UpdatedAt)))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("ticket %q: %w", in.ID, store.ErrAlreadyExists)
		}
		if err != nil {
			return fmt.Errorf("sqlite: create ticket %q: %w", in.ID, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO diagnostic_states (ticket_id, updated_at) VALUES (?, ?)`,
			in.ID, micros(in.CreatedAt)); err != nil {
			return fmt.Errorf("sqlite: create diagnostic state of ticket %q: %w", in.ID, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GetTicket implements store.MonitorStore.
func (s *Store) GetTicket(ctx context.Context, id string) (*store.Ticket, error) {
	t, err := scanTicket(s.read.QueryRowContext(ctx, `SELECT `+ticketCols+` FROM tickets WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("ticket %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get ticket %q: %w", id, err)
	}
	return t, nil
}

// ListTickets implements store.MonitorStore in id order.
func (s *Store) ListTickets(ctx context.Context, p store.ListTicketsParams) ([]*store.Ticket, error) {
	q := `SELECT ` + ticketCols + ` FROM tickets WHERE (? = '' OR tenant_id = ?) AND id > ?`
	args := []any{p.TenantID, p.TenantID, p.AfterID}
	if len(p.Statuses) > 0 {
		in, a := inList(p.Statuses)
		q += ` AND status IN ` + in
		args = append(args, a...)
	}
	rows, err := s.read.QueryContext(ctx, q+` ORDER BY id LIMIT ?`, append(args, noLimit(p.Limit))...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list tickets: %w", err)
	}
	return collect(rows, "tickets", scanTicket)
}

// UpdateTicket implements store.MonitorStore as a compare-and-set on Version.
func (s *Store) UpdateTicket(ctx context.Context, t *store.Ticket) (*store.Ticket, error) {
	if !t.Status.Valid() {
		return nil, fmt.Errorf("ticket %s: status %q: want open, done or cancelled: %w", t.ID, t.Status, store.ErrInvalid)
	}
	var meta sql.NullString
	if len(t.Metadata) > 0 {
		meta = encodeMap(t.Metadata)
	}
	var out *store.Ticket
	err := s.inTx(ctx, func(tx *wtx) error {
		var err error
		out, err = scanTicket(tx.QueryRowContext(ctx, `UPDATE tickets SET title = ?, description = ?,
			metadata = ?, status = ?, version = version + 1, updated_at = ?
			WHERE id = ? AND version = ? RETURNING `+ticketCols,
			t.Title, t.Description, meta, t.Status, micros(s.timestamp()), t.ID, t.Version))
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var v int64
		if err := tx.QueryRowContext(ctx, `SELECT version FROM tickets WHERE id = ?`, t.ID).Scan(&v); errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("ticket %q: %w", t.ID, store.ErrNotFound)
		}
		return fmt.Errorf("ticket %q: expected version %d, stored %d: %w", t.ID, t.Version, v, store.ErrVersionMismatch)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SubmitWorkflowResult implements store.MonitorStore: an upsert whose
// version counts submissions.
func (s *Store) SubmitWorkflowResult(ctx context.Context, r *store.WorkflowResult) (*store.WorkflowResult, error) {
	status := r.ValidationStatus
	if status == "" {
		status = store.ValidationPending
	}
	if !status.Valid() {
		return nil, fmt.Errorf("workflow result of ticket %s: validation status %q: want pending, valid or invalid: %w",
			r.TicketID, status, store.ErrInvalid)
	}
	result, err := jsonValue("workflow result of ticket "+r.TicketID, r.Result)
	if err != nil {
		return nil, err
	}
	now := s.timestamp()
	submitted := orNow(r.SubmittedAt, now)
	var out *store.WorkflowResult
	err = s.inTx(ctx, func(tx *wtx) error {
		if err := ticketExists(ctx, tx, r.TicketID); err != nil {
			return err
		}
		var err error
		out, err = scanWorkflowResult(tx.QueryRowContext(ctx, `INSERT INTO workflow_results
			(ticket_id, task_id, result, validation_status, validation_note, version, submitted_at, updated_at)
			VALUES (?, ?, ?, ?, ?, 1, ?, ?)
			ON CONFLICT (ticket_id) DO UPDATE SET task_id = excluded.task_id, result = excluded.result,
				validation_status = excluded.validation_status, validation_note = excluded.validation_note,
				version = workflow_results.version + 1, submitted_at = excluded.submitted_at,
				updated_at = excluded.updated_at
			RETURNING `+resultCols,
			r.TicketID, r.TaskID, result, status, r.ValidationNote, micros(submitted), micros(now)))
		if err != nil {
			return fmt.Errorf("sqlite: submit workflow result of ticket %q: %w", r.TicketID, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GetWorkflowResult implements store.MonitorStore.
func (s *Store) GetWorkflowResult(ctx context.Context, ticketID string) (*store.WorkflowResult, error) {
	w, err := scanWorkflowResult(s.read.QueryRowContext(ctx, `SELECT `+resultCols+` FROM workflow_results
		WHERE ticket_id = ?`, ticketID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("workflow result of ticket %q: %w", ticketID, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get workflow result of ticket %q: %w", ticketID, err)
	}
	return w, nil
}

// ticketExists returns ErrNotFound unless the ticket exists.
func ticketExists(ctx context.Context, tx *wtx, id string) error {
	var one int
	err := tx.QueryRowContext(ctx, `SELECT 1 FROM tickets WHERE id = ?`, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("ticket %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("sqlite: find ticket %q: %w", id, err)
	}
	return nil
}
