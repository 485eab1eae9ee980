package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

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
	in.CreatedAt = orNow(in.CreatedAt, s.clock())
	meta, err := metadataArg(in.Metadata)
	if err != nil {
		return nil, fmt.Errorf("ticket %s: metadata: %w", in.ID, err)
	}
	var out *store.Ticket
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = scanTicket(tx.QueryRow(ctx, `INSERT INTO tickets
			(id, tenant_id, title, description, metadata, status, version, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, 1, $7, $7) ON CONFLICT (id) DO NOTHING RETURNING `+ticketCols,
			in.ID, in.TenantID, in.Title, in.Description, meta, in.Status, in.CreatedAt))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("ticket %q: %w", in.ID, store.ErrAlreadyExists)
		}
		if err != nil {
			return mapErr("create ticket "+in.ID, err)
		}
		_, err = tx.Exec(ctx, `INSERT INTO diagnostic_states (ticket_id, updated_at) VALUES ($1, $2)`, in.ID, in.CreatedAt)
		return mapErr("create diagnostic state of ticket "+in.ID, err)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GetTicket implements store.MonitorStore.
func (s *Store) GetTicket(ctx context.Context, id string) (*store.Ticket, error) {
	t, err := scanTicket(s.pool.QueryRow(ctx, `SELECT `+ticketCols+` FROM tickets WHERE id = $1`, id))
	if err != nil {
		return nil, mapErr("get ticket "+id, err)
	}
	return t, nil
}

// ListTickets implements store.MonitorStore in id order.
func (s *Store) ListTickets(ctx context.Context, p store.ListTicketsParams) ([]*store.Ticket, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+ticketCols+` FROM tickets
		WHERE ($1 = '' OR tenant_id = $1) AND id > $2 AND ($3::text[] IS NULL OR status = ANY($3))
		ORDER BY id LIMIT $4`, p.TenantID, p.AfterID, statusArgs(p.Statuses), limitArg(p.Limit))
	if err != nil {
		return nil, mapErr("list tickets", err)
	}
	return collect(rows, "tickets", scanTicket)
}

// UpdateTicket implements store.MonitorStore as a compare-and-set on Version.
func (s *Store) UpdateTicket(ctx context.Context, t *store.Ticket) (*store.Ticket, error) {
	if !t.Status.Valid() {
		return nil, fmt.Errorf("ticket %s: status %q: want open, done or cancelled: %w", t.ID, t.Status, store.ErrInvalid)
	}
	meta, err := metadataArg(t.Metadata)
	if err != nil {
		return nil, fmt.Errorf("ticket %s: metadata: %w", t.ID, err)
	}
	var out *store.Ticket
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = scanTicket(tx.QueryRow(ctx, `UPDATE tickets SET title = $1, description = $2,
			metadata = $3, status = $4, version = version + 1, updated_at = $5
			WHERE id = $6 AND version = $7 RETURNING `+ticketCols,
			t.Title, t.Description, meta, t.Status, s.clock(), t.ID, t.Version))
		if !errors.Is(err, pgx.ErrNoRows) {
			return mapErr("update ticket "+t.ID, err)
		}
		var v int64
		if err := tx.QueryRow(ctx, `SELECT version FROM tickets WHERE id = $1`, t.ID).Scan(&v); err != nil {
			return mapErr("ticket "+t.ID, err)
		}
		return fmt.Errorf("ticket %q: expected version %d, stored %d: %w", t.ID, t.Version, v, store.ErrVersionMismatch)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SubmitWorkflowResult implements store.MonitorStore: an upsert whose
// version counts submissions. The foreign key makes an unknown ticket
// ErrNotFound.
func (s *Store) SubmitWorkflowResult(ctx context.Context, r *store.WorkflowResult) (*store.WorkflowResult, error) {
	status := r.ValidationStatus
	if status == "" {
		status = store.ValidationPending
	}
	if !status.Valid() {
		return nil, fmt.Errorf("workflow result of ticket %s: validation status %q: want pending, valid or invalid: %w",
			r.TicketID, status, store.ErrInvalid)
	}
	result, err := jsonArg("workflow result of ticket "+r.TicketID, r.Result)
	if err != nil {
		return nil, err
	}
	now := s.clock()
	w, err := scanWorkflowResult(s.pool.QueryRow(ctx, `INSERT INTO workflow_results
		(ticket_id, task_id, result, validation_status, validation_note, version, submitted_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, 1, $6, $7)
		ON CONFLICT (ticket_id) DO UPDATE SET task_id = excluded.task_id, result = excluded.result,
			validation_status = excluded.validation_status, validation_note = excluded.validation_note,
			version = workflow_results.version + 1, submitted_at = excluded.submitted_at,
			updated_at = excluded.updated_at
		RETURNING `+resultCols,
		r.TicketID, r.TaskID, result, status, r.ValidationNote, orNow(r.SubmittedAt, now), now))
	if err != nil {
		return nil, mapErr("submit workflow result of ticket "+r.TicketID, err)
	}
	return w, nil
}

// GetWorkflowResult implements store.MonitorStore.
func (s *Store) GetWorkflowResult(ctx context.Context, ticketID string) (*store.WorkflowResult, error) {
	w, err := scanWorkflowResult(s.pool.QueryRow(ctx, `SELECT `+resultCols+` FROM workflow_results
		WHERE ticket_id = $1`, ticketID))
	if err != nil {
		return nil, mapErr("get workflow result of ticket "+ticketID, err)
	}
	return w, nil
}

// ticketExists returns ErrNotFound unless the ticket exists. FOR KEY SHARE
// keeps it from being deleted before the caller's transaction commits.
func ticketExists(ctx context.Context, tx pgx.Tx, id string) error {
	var one int
	err := tx.QueryRow(ctx, `SELECT 1 FROM tickets WHERE id = $1 FOR KEY SHARE`, id).Scan(&one)
	return mapErr("ticket "+id, err)
}
