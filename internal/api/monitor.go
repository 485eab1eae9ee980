package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/monitor"
	"github.com/agentkernel/agentkernel/internal/store"
)

// monitorAPI serves agent events, activity, tickets and tasks (seed 001).
type monitorAPI struct {
	s   *Server
	mon *monitor.Service
	st  monitor.Store
}

func (s *Server) registerMonitorRoutes(mon *monitor.Service) {
	m := &monitorAPI{s: s, mon: mon, st: mon.Store()}
	a := s.authenticated
	s.mux.HandleFunc("POST /v1/sandboxes/{id}/events", a(m.postEvents))
	s.mux.HandleFunc("GET /v1/sandboxes/{id}/events", a(m.listEvents))
	s.mux.HandleFunc("GET /v1/sandboxes/{id}/activity", a(m.s.noQuery(m.activity)))
	m.registerTaskRoutes()
	m.registerTicketRoutes()
}

// sandboxOf checks the caller may see the sandbox (404 otherwise).
func (m *monitorAPI) sandboxOf(r *http.Request) (string, time.Time, error) {
	id := r.PathValue("id")
	if m.s.sandboxes == nil {
		return id, time.Time{}, nil
	}
	in, err := m.s.sandboxes.Get(r.Context(), PrincipalFrom(r.Context()).TenantID, id)
	if err != nil {
		return id, time.Time{}, sandboxError(id, err)
	}
	return id, in.CreatedAt, nil
}

func (m *monitorAPI) postEvents(w http.ResponseWriter, r *http.Request) {
	id, _, err := m.sandboxOf(r)
	if err != nil {
		m.s.writeError(w, r, err)
		return
	}
	// One event, or {"events": [...]}.
	var raw json.RawMessage
	if err := decodeJSON(r, &raw); err != nil {
		m.s.writeError(w, r, err)
		return
	}
	var batch struct {
		Events []monitor.EventInput `json:"events"`
	}
	var probe map[string]json.RawMessage
	_ = json.Unmarshal(raw, &probe)
	if _, ok := probe["events"]; ok {
		err = strictUnmarshal(raw, &batch)
	} else {
		var ev monitor.EventInput
		err = strictUnmarshal(raw, &ev)
		batch.Events = []monitor.EventInput{ev}
	}
	if err != nil {
		m.s.writeError(w, r, err)
		return
	}
	evs, err := m.mon.Ingest(r.Context(), id, batch.Events)
	if err != nil {
		m.s.writeError(w, r, monitorError(err))
		return
	}
	out := listJSON[eventJSON]{Data: make([]eventJSON, 0, len(evs))}
	for _, ev := range evs {
		out.Data = append(out.Data, toEventJSON(ev))
	}
	writeJSON(w, http.StatusCreated, out)
}

func (m *monitorAPI) listEvents(w http.ResponseWriter, r *http.Request) {
	id, _, err := m.sandboxOf(r)
	if err != nil {
		m.s.writeError(w, r, err)
		return
	}
	after, limit, err := pageParams(r, 100)
	if err != nil {
		m.s.writeError(w, r, err)
		return
	}
	evs, err := m.st.ListAgentEvents(r.Context(), store.ListAgentEventsParams{SandboxID: id, AfterSeq: after, Limit: limit + 1})
	if err != nil {
		m.s.writeError(w, r, err)
		return
	}
	out := listJSON[eventJSON]{Data: []eventJSON{}}
	for i, ev := range evs {
		if i == limit {
			out.HasMore = true
			break
		}
		out.Data = append(out.Data, toEventJSON(ev))
	}
	writeJSON(w, http.StatusOK, out)
}

func (m *monitorAPI) activity(w http.ResponseWriter, r *http.Request) {
	id, created, err := m.sandboxOf(r)
	if err != nil {
		m.s.writeError(w, r, err)
		return
	}
	rep, err := m.mon.Activity(r.Context(), id, created)
	if err != nil {
		m.s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toActivityJSON(rep))
}

// pageParams reads after (a seq) and limit (1..1000).
func pageParams(r *http.Request, def int) (int64, int, error) {
	q := r.URL.Query()
	if err := checkQuery(q, "after", "limit"); err != nil {
		return 0, 0, err
	}
	var after int64
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, 0, BadRequest("query parameter \"after\" must be a non-negative integer")
		}
		after = n
	}
	limit, err := queryLimit(q, def, 1000)
	if err != nil {
		return 0, 0, err
	}
	return after, limit, nil
}

// strictUnmarshal decodes with unknown fields refused, as decodeJSON does.
func strictUnmarshal(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	return nil
}

// monitorError maps the monitor's validation errors to 4xx.
func monitorError(err error) error {
	switch {
	case errors.Is(err, monitor.ErrBadEvent), errors.Is(err, monitor.ErrInvalidTask):
		return Errorf(http.StatusUnprocessableEntity, TypeInvalidRequest, "%s", err)
	case errors.Is(err, store.ErrInvalid):
		return Errorf(http.StatusUnprocessableEntity, TypeInvalidRequest, "%s", err)
	}
	return err
}

// processOutput reads a task's agent output (logs).
func (m *monitorAPI) processOutput(r *http.Request, t *store.Task, stream string, offset int64) (*guest.OutputChunk, error) {
	return m.s.sandboxes.ProcessOutput(r.Context(), t.TenantID, t.SandboxID, guest.OutputRequest{ID: t.ProcessID, Stream: stream, Offset: offset})
}
