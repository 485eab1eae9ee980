package api

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/agentkernel/agentkernel/internal/store"
)

func (m *monitorAPI) registerTicketRoutes() {
	a := m.s.authenticated
	m.s.mux.HandleFunc("POST /v1/tickets", a(m.createTicket))
	m.s.mux.HandleFunc("GET /v1/tickets", a(m.listTickets))
	m.s.mux.HandleFunc("GET /v1/tickets/{id}", a(m.s.noQuery(m.getTicket)))
	m.s.mux.HandleFunc("POST /v1/tickets/{id}/results", a(m.submitResult))
}

// createTicketRequest is the body of POST /v1/tickets.
type createTicketRequest struct {
	Title       string            `json:"title"`
	Description string            `json:"description"`
	Metadata    map[string]string `json:"metadata"`
}

func (m *monitorAPI) createTicket(w http.ResponseWriter, r *http.Request) {
	var in createTicketRequest
	if err := decodeJSON(r, &in); err != nil {
		m.s.writeError(w, r, err)
		return
	}
	if err := firstErr(requireField("title", in.Title), maxLen("title", in.Title, 500), maxLen("description", in.Description, 64<<10)); err != nil {
		m.s.writeError(w, r, err)
		return
	}
	if len(in.Metadata) > 64 {
		m.s.writeError(w, r, Errorf(http.StatusUnprocessableEntity, TypeInvalidRequest, "field \"metadata\" has %d keys; the limit is 64", len(in.Metadata)))
		return
	}
	t, err := m.st.CreateTicket(r.Context(), &store.Ticket{TenantID: PrincipalFrom(r.Context()).TenantID,
		Title: in.Title, Description: in.Description, Metadata: in.Metadata})
	if err != nil {
		m.s.writeError(w, r, monitorError(err))
		return
	}
	writeJSON(w, http.StatusCreated, toTicketJSON(t))
}

func (m *monitorAPI) listTickets(w http.ResponseWriter, r *http.Request) {
	if err := checkQuery(r.URL.Query(), "status"); err != nil {
		m.s.writeError(w, r, err)
		return
	}
	p := store.ListTicketsParams{TenantID: PrincipalFrom(r.Context()).TenantID}
	if st := r.URL.Query().Get("status"); st != "" {
		if !store.TicketStatus(st).Valid() {
			m.s.writeError(w, r, BadRequest("query parameter \"status\": %q is not open, done or cancelled", st))
			return
		}
		p.Statuses = []store.TicketStatus{store.TicketStatus(st)}
	}
	ts, err := m.st.ListTickets(r.Context(), p)
	if err != nil {
		m.s.writeError(w, r, err)
		return
	}
	out := listJSON[ticketJSON]{Data: make([]ticketJSON, 0, len(ts))}
	for _, t := range ts {
		out.Data = append(out.Data, toTicketJSON(t))
	}
	writeJSON(w, http.StatusOK, out)
}

func (m *monitorAPI) ticket(r *http.Request) (*store.Ticket, error) {
	id := r.PathValue("id")
	t, err := m.st.GetTicket(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && t.TenantID != PrincipalFrom(r.Context()).TenantID) {
		return nil, NotFound("ticket", id)
	}
	return t, err
}

// getTicket shows the workflow: its tasks, diagnostic safeguards and result.
func (m *monitorAPI) getTicket(w http.ResponseWriter, r *http.Request) {
	t, err := m.ticket(r)
	if err != nil {
		m.s.writeError(w, r, err)
		return
	}
	out := toTicketJSON(t)
	tasks, err := m.st.ListTasks(r.Context(), store.ListTasksParams{TicketID: t.ID})
	if err != nil {
		m.s.writeError(w, r, err)
		return
	}
	out.Tasks = make([]taskJSON, 0, len(tasks))
	for _, tk := range tasks {
		out.Tasks = append(out.Tasks, toTaskJSON(tk))
	}
	if d, err := m.st.GetDiagnosticState(r.Context(), t.ID); err == nil {
		out.Diagnostics = toDiagnosticJSON(d)
	}
	if res, err := m.st.GetWorkflowResult(r.Context(), t.ID); err == nil {
		out.Result = toResultJSON(res)
	}
	writeJSON(w, http.StatusOK, out)
}

// submitResultRequest is the body of POST /v1/tickets/{id}/results.
type submitResultRequest struct {
	TaskID           string          `json:"task_id"`
	Result           json.RawMessage `json:"result"`
	ValidationStatus string          `json:"validation_status"`
	ValidationNote   string          `json:"validation_note"`
}

// submitResult records the workflow's result. Optional: the diagnostic
// sweep treats a workflow whose tasks all completed, none failed, as done.
func (m *monitorAPI) submitResult(w http.ResponseWriter, r *http.Request) {
	t, err := m.ticket(r)
	if err != nil {
		m.s.writeError(w, r, err)
		return
	}
	var in submitResultRequest
	if err := decodeJSON(r, &in); err != nil {
		m.s.writeError(w, r, err)
		return
	}
	if len(in.Result) == 0 || string(in.Result) == "null" {
		m.s.writeError(w, r, BadRequest("field \"result\" is required: any JSON value describing the outcome"))
		return
	}
	vs := store.ValidationStatus(in.ValidationStatus)
	if vs == "" {
		vs = store.ValidationPending
	}
	if !vs.Valid() {
		m.s.writeError(w, r, Errorf(http.StatusUnprocessableEntity, TypeInvalidRequest, "field \"validation_status\": %q is not pending, valid or invalid", in.ValidationStatus))
		return
	}
	if err := maxLen("validation_note", in.ValidationNote, 4096); err != nil {
		m.s.writeError(w, r, err)
		return
	}
	if in.TaskID != "" {
		tk, err := m.st.GetTask(r.Context(), in.TaskID)
		if err != nil || tk.TicketID != t.ID {
			m.s.writeError(w, r, Errorf(http.StatusUnprocessableEntity, TypeInvalidRequest, "field \"task_id\": task %q is not a task of ticket %s", in.TaskID, t.ID))
			return
		}
	}
	res, err := m.st.SubmitWorkflowResult(r.Context(), &store.WorkflowResult{TicketID: t.ID, TaskID: in.TaskID, Result: in.Result,
		ValidationStatus: vs, ValidationNote: in.ValidationNote})
	if err != nil {
		m.s.writeError(w, r, monitorError(err))
		return
	}
	writeJSON(w, http.StatusCreated, toResultJSON(res))
}
