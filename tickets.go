package agentkernel

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"
)

// Ticket is a workflow: tasks that together do one piece of work.
type Ticket struct {
	ID          string             `json:"id"`
	Type        string             `json:"type"`
	Title       string             `json:"title"`
	Description string             `json:"description,omitempty"`
	Metadata    map[string]string  `json:"metadata"`
	Status      string             `json:"status"` // open, done, cancelled
	CreatedAt   time.Time          `json:"created_at"`
	UpdatedAt   time.Time          `json:"updated_at"`
	Tasks       []Task             `json:"tasks,omitempty"`
	Diagnostics *TicketDiagnostics `json:"diagnostics,omitempty"`
	Result      *WorkflowResult    `json:"result,omitempty"`
}

// TicketDiagnostics are a workflow's diagnostic safeguards.
type TicketDiagnostics struct {
	Attempts            int64      `json:"attempts"`
	ConsecutiveFailures int64      `json:"consecutive_failures"`
	Completed           int64      `json:"completed"`
	PendingTaskID       string     `json:"pending_task_id,omitempty"`
	LastSpawnedAt       *time.Time `json:"last_spawned_at,omitempty"`
	HumanReview         bool       `json:"human_review"`
	HumanReviewReason   string     `json:"human_review_reason,omitempty"`
}

// WorkflowResult is a ticket's submitted result.
type WorkflowResult struct {
	TicketID         string          `json:"ticket_id"`
	TaskID           string          `json:"task_id,omitempty"`
	Result           json.RawMessage `json:"result"`
	ValidationStatus string          `json:"validation_status"` // pending, valid, invalid
	ValidationNote   string          `json:"validation_note,omitempty"`
	Version          int64           `json:"version,omitempty"`
	SubmittedAt      time.Time       `json:"submitted_at,omitzero"`
}

// TicketCreateParams creates a ticket.
type TicketCreateParams struct {
	Title       string            `json:"title"`
	Description string            `json:"description,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
}

// TicketsService manages tickets.
type TicketsService struct{ c *Client }

// Tickets returns the tickets service.
func (c *Client) Tickets() *TicketsService { return &TicketsService{c: c} }

// Create records a ticket.
func (s *TicketsService) Create(ctx context.Context, p TicketCreateParams) (*Ticket, error) {
	var out Ticket
	return &out, s.c.do(ctx, http.MethodPost, "/v1/tickets", p, &out)
}

// Get returns a ticket with its tasks, diagnostics and result.
func (s *TicketsService) Get(ctx context.Context, id string) (*Ticket, error) {
	var out Ticket
	return &out, s.c.do(ctx, http.MethodGet, "/v1/tickets/"+url.PathEscape(id), nil, &out)
}

// List returns the caller's tickets (status "" = all).
func (s *TicketsService) List(ctx context.Context, status string) ([]Ticket, error) {
	path := "/v1/tickets"
	if status != "" {
		path += "?status=" + url.QueryEscape(status)
	}
	var out struct {
		Data []Ticket `json:"data"`
	}
	return out.Data, s.c.do(ctx, http.MethodGet, path, nil, &out)
}

// SubmitResult records the workflow's result (optional: a workflow whose
// tasks all completed needs none).
func (s *TicketsService) SubmitResult(ctx context.Context, id string, r WorkflowResult) (*WorkflowResult, error) {
	var out WorkflowResult
	in := map[string]any{"result": r.Result, "validation_status": r.ValidationStatus, "validation_note": r.ValidationNote, "task_id": r.TaskID}
	return &out, s.c.do(ctx, http.MethodPost, "/v1/tickets/"+url.PathEscape(id)+"/results", in, &out)
}
