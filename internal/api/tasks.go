package api

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/monitor"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
)

func (m *monitorAPI) registerTaskRoutes() {
	a := m.s.authenticated
	m.s.mux.HandleFunc("POST /v1/tasks", a(m.createTask))
	m.s.mux.HandleFunc("GET /v1/tasks", a(m.listTasks))
	m.s.mux.HandleFunc("GET /v1/tasks/{id}", a(m.s.noQuery(m.getTask)))
	m.s.mux.HandleFunc("GET /v1/tasks/{id}/logs", a(m.s.query(m.taskLogs, "stream", "offset")))
	m.s.mux.HandleFunc("GET /v1/tasks/{id}/transcript", a(m.s.noQuery(m.taskTranscript)))
}

// createTaskRequest is the body of POST /v1/tasks.
type createTaskRequest struct {
	TicketID       string              `json:"ticket_id"`
	Command        []string            `json:"command"`
	Env            map[string]string   `json:"env"`
	Sandbox        monitor.SandboxSpec `json:"sandbox"`
	TranscriptPath string              `json:"transcript_path"`
}

func (m *monitorAPI) createTask(w http.ResponseWriter, r *http.Request) {
	var in createTaskRequest
	if err := decodeJSON(r, &in); err != nil {
		m.s.writeError(w, r, err)
		return
	}
	if m.s.sandboxes != nil {
		// The sandbox is created when the task launches; a request it could
		// never be created for is refused now, not failed later.
		p := in.Sandbox.CreateParams(PrincipalFrom(r.Context()).TenantID)
		if _, err := m.s.sandboxes.Resolve(r.Context(), &p); err != nil {
			var le *sandbox.LimitError
			if errors.As(err, &le) {
				err = BadRequest("field %q = %s: %s", "sandbox.limits."+le.Field, le.Value, le.Reason)
			}
			m.s.writeError(w, r, sandboxError("", err))
			return
		}
	}
	t, err := m.mon.CreateTask(r.Context(), monitor.CreateTaskParams{
		TenantID: PrincipalFrom(r.Context()).TenantID, TicketID: in.TicketID, Command: in.Command, Env: in.Env,
		Sandbox: in.Sandbox, TranscriptPath: in.TranscriptPath,
	})
	if errors.Is(err, store.ErrNotFound) {
		m.s.writeError(w, r, NotFound("ticket", in.TicketID))
		return
	}
	if err != nil {
		m.s.writeError(w, r, monitorError(err))
		return
	}
	writeJSON(w, http.StatusCreated, toTaskJSON(t))
}

func (m *monitorAPI) listTasks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if err := checkQuery(q, "ticket_id", "sandbox_id", "status", "kind", "after", "limit"); err != nil {
		m.s.writeError(w, r, err)
		return
	}
	p := store.ListTasksParams{TenantID: PrincipalFrom(r.Context()).TenantID, TicketID: q.Get("ticket_id"), SandboxID: q.Get("sandbox_id"),
		AfterID: q.Get("after")}
	// Oldest first; every task unless a limit pages them (has_more says
	// whether more follow the last one).
	limit := 0
	if q.Get("limit") != "" {
		n, err := queryLimit(q, 0, 1000)
		if err != nil {
			m.s.writeError(w, r, err)
			return
		}
		limit, p.Limit = n, n+1
	}
	if st := q.Get("status"); st != "" {
		if !store.TaskStatus(st).Valid() {
			m.s.writeError(w, r, BadRequest("query parameter \"status\": %q is not a task status (pending, claiming, assigned, running, completed, failed, cancelled)", st))
			return
		}
		p.Statuses = []store.TaskStatus{store.TaskStatus(st)}
	}
	if k := q.Get("kind"); k != "" {
		if !store.TaskKind(k).Valid() {
			m.s.writeError(w, r, BadRequest("query parameter \"kind\": %q is not agent or diagnostic", k))
			return
		}
		p.Kind = store.TaskKind(k)
	}
	ts, err := m.st.ListTasks(r.Context(), p)
	if err != nil {
		m.s.writeError(w, r, err)
		return
	}
	out := listJSON[taskJSON]{Data: make([]taskJSON, 0, len(ts))}
	if limit > 0 && len(ts) > limit {
		ts, out.HasMore = ts[:limit], true
	}
	for _, t := range ts {
		out.Data = append(out.Data, toTaskJSON(t))
	}
	writeJSON(w, http.StatusOK, out)
}

// task loads the caller's task; another tenant's is a 404.
func (m *monitorAPI) task(r *http.Request) (*store.Task, error) {
	id := r.PathValue("id")
	t, err := m.st.GetTask(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && t.TenantID != PrincipalFrom(r.Context()).TenantID) {
		return nil, NotFound("task", id)
	}
	return t, err
}

func (m *monitorAPI) getTask(w http.ResponseWriter, r *http.Request) {
	t, err := m.task(r)
	if err != nil {
		m.s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toTaskJSON(t))
}

// taskLogs reads the agent's live output from its sandbox.
func (m *monitorAPI) taskLogs(w http.ResponseWriter, r *http.Request) {
	t, err := m.task(r)
	if err != nil {
		m.s.writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	stream := q.Get("stream")
	if stream != "" && stream != "stdout" && stream != "stderr" {
		m.s.writeError(w, r, BadRequest("query parameter \"stream\" must be stdout or stderr"))
		return
	}
	var offset int64
	if v := q.Get("offset"); v != "" {
		if offset, err = strconv.ParseInt(v, 10, 64); err != nil || offset < 0 {
			m.s.writeError(w, r, BadRequest("query parameter \"offset\" must be a non-negative integer"))
			return
		}
	}
	if t.ProcessID == "" || m.s.sandboxes == nil {
		m.s.writeError(w, r, Errorf(http.StatusConflict, TypeConflict, "task %s has no running agent process (status %s); see its transcript", t.ID, t.Status))
		return
	}
	in, err := m.s.sandboxes.Get(r.Context(), t.TenantID, t.SandboxID)
	if err != nil || in.State != "active" {
		m.s.writeError(w, r, Errorf(http.StatusConflict, TypeConflict, "task %s: its sandbox is not running; GET /v1/tasks/%s/transcript has what was saved", t.ID, t.ID))
		return
	}
	out, err := m.processOutput(r, t, stream, offset)
	if err != nil {
		if guest.IsNotFound(err) {
			m.s.writeError(w, r, NotFound("process", t.ProcessID))
			return
		}
		m.s.writeError(w, r, sandboxError(t.SandboxID, err))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (m *monitorAPI) taskTranscript(w http.ResponseWriter, r *http.Request) {
	t, err := m.task(r)
	if err != nil {
		m.s.writeError(w, r, err)
		return
	}
	tr, err := m.st.LatestTranscript(r.Context(), store.LatestTranscriptParams{TaskID: t.ID})
	if errors.Is(err, store.ErrNotFound) {
		m.s.writeError(w, r, Errorf(http.StatusNotFound, TypeNotFound, "task %s has no saved transcript yet: one is saved when its sandbox is terminated", t.ID))
		return
	}
	if err != nil {
		m.s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"type": "transcript", "id": tr.ID, "task_id": tr.TaskID, "sandbox_id": tr.SandboxID, "source": tr.Source,
		"size": tr.Size, "sha256": tr.SHA256, "saved_at": tr.SavedAt, "content": string(tr.Content),
	})
}
