package api

import (
	"errors"
	"net/http"

	"github.com/agentkernel/agentkernel/internal/lineage"
	"github.com/agentkernel/agentkernel/internal/managed"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Fork, rewind, branches and history of a session (agentkernel's own, not
// in the Managed Agents API; the service is internal/lineage):
//
//	POST /v1/sessions/{id}/fork    {"event_id": "sevt_…"}   → the new session
//	POST /v1/sessions/{id}/rewind  {"event_id": "sevt_…"}   → {"session", "branch"}
//	GET  /v1/sessions/{id}/branches                          → {"data": [branches]}
//	GET  /v1/sessions/{id}/history                           → lineage, turns, branches
func (s *Server) registerLineageRoutes(m *managedAPI, l *lineage.Service) {
	a := s.authenticated
	oa := func(h http.HandlerFunc) http.HandlerFunc { return a(s.sessionOwner(h)) }
	s.mux.HandleFunc("POST /v1/sessions/{id}/fork", oa(s.noQuery(func(w http.ResponseWriter, r *http.Request) {
		eventID, err := eventIDBody(r, false)
		if err != nil {
			m.writeError(w, r, err)
			return
		}
		f, err := l.Fork(r.Context(), tenant(r), r.PathValue("id"), eventID)
		if err != nil {
			m.writeError(w, r, lineageErr(err))
			return
		}
		out, err := m.svc.SessionJSON(r.Context(), f)
		if err != nil {
			m.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, out)
	})))
	s.mux.HandleFunc("POST /v1/sessions/{id}/rewind", oa(s.noQuery(func(w http.ResponseWriter, r *http.Request) {
		eventID, err := eventIDBody(r, true)
		if err != nil {
			m.writeError(w, r, err)
			return
		}
		sess, branch, err := l.Rewind(r.Context(), tenant(r), r.PathValue("id"), eventID)
		if err != nil {
			m.writeError(w, r, lineageErr(err))
			return
		}
		sj, err := m.svc.SessionJSON(r.Context(), sess)
		if err != nil {
			m.writeError(w, r, err)
			return
		}
		bj, err := m.svc.SessionJSON(r.Context(), branch)
		if err != nil {
			m.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"session": sj, "branch": bj})
	})))
	s.mux.HandleFunc("GET /v1/sessions/{id}/branches", oa(s.noQuery(func(w http.ResponseWriter, r *http.Request) {
		bs, err := l.Branches(r.Context(), tenant(r), r.PathValue("id"))
		if err != nil {
			m.writeError(w, r, lineageErr(err))
			return
		}
		data := make([]map[string]any, 0, len(bs))
		for _, b := range bs {
			bj, err := m.svc.SessionJSON(r.Context(), b)
			if err != nil {
				m.writeError(w, r, err)
				return
			}
			data = append(data, bj)
		}
		writeJSON(w, http.StatusOK, map[string]any{"data": data})
	})))
	s.mux.HandleFunc("GET /v1/sessions/{id}/history", oa(s.noQuery(func(w http.ResponseWriter, r *http.Request) {
		h, err := l.History(r.Context(), tenant(r), r.PathValue("id"))
		if err != nil {
			m.writeError(w, r, lineageErr(err))
			return
		}
		turns := make([]map[string]any, 0, len(h.Turns))
		for _, t := range h.Turns {
			turns = append(turns, turnJSON(t))
		}
		branches := make([]map[string]any, 0, len(h.Branches))
		for _, b := range h.Branches {
			branches = append(branches, map[string]any{"id": b.ID, "branch_at_seq": b.Lineage.BranchAtSeq,
				"branched_at": b.Lineage.BranchedAt, "workspace": b.Lineage.WorkspaceSeed})
		}
		writeJSON(w, http.StatusOK, map[string]any{"session_id": h.Session.ID, "lineage": managed.LineageJSON(h.Session),
			"turns": turns, "branches": branches})
	})))
}

// eventRef is the body of fork and rewind: the event to start from (a
// fork's default is the latest).
type eventRef struct {
	EventID string `json:"event_id"`
}

// eventIDBody reads an eventRef; an empty body is no event id.
func eventIDBody(r *http.Request, required bool) (string, error) {
	in, err := decodeObject(r)
	if err != nil {
		return "", err
	}
	var id string
	if required {
		id, err = in.ReqStr("event_id")
	} else if in.Set("event_id") {
		id, err = in.Str("event_id")
	}
	if err == nil {
		err = in.Strict()
	}
	return id, err
}

// lineageErr keeps the service's message on a 404 (it names the session
// or the event).
func lineageErr(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return Errorf(http.StatusNotFound, TypeNotFound, "%s", err)
	}
	return err
}

func turnJSON(t lineage.Turn) map[string]any {
	r := t.Run
	var usage any
	if len(r.Usage) > 0 {
		usage = r.Usage
	}
	var workspace any
	if t.Workspace != "" {
		workspace = t.Workspace
	}
	return map[string]any{"id": r.ID, "seq": r.Seq, "status": string(r.Status), "started_at": r.CreatedAt,
		"ended_at": r.CompletedAt, "error": r.Error, "usage": usage, "workspace": workspace}
}
