package api

import (
	"net/http"
	"slices"

	"github.com/agentkernel/agentkernel/internal/managed"
	"github.com/agentkernel/agentkernel/internal/session"
)

// Session threads (multi-agent, issue 14): anthropic-sdk-go's
// Beta.Sessions.Threads. A session's primary thread is the session itself;
// its child threads are sessions of their own with their own event logs.

func (s *Server) registerThreadRoutes(m *managedAPI) {
	a := s.authenticated
	oa := func(h http.HandlerFunc) http.HandlerFunc { return a(s.sessionOwner(h)) }
	s.mux.HandleFunc("GET /v1/sessions/{id}/threads", oa(m.listThreads))
	s.mux.HandleFunc("GET /v1/sessions/{id}/threads/{thread_id}", oa(s.noQuery(m.getThread)))
	s.mux.HandleFunc("POST /v1/sessions/{id}/threads/{thread_id}/archive", oa(s.noQuery(m.archiveThread)))
	s.mux.HandleFunc("GET /v1/sessions/{id}/threads/{thread_id}/events", oa(m.listThreadEvents))
	s.mux.HandleFunc("GET /v1/sessions/{id}/threads/{thread_id}/stream", oa(m.streamThreadEvents))
	s.mux.HandleFunc("GET /v1/sessions/{id}/threads/{thread_id}/events/{event_id}", oa(s.noQuery(m.getThreadEvent)))
}

// threadStatuses are the values of the list's statuses filter.
var threadStatuses = []string{session.StatusRunning, session.StatusIdle, session.StatusRescheduling, session.StatusTerminated}

// listThreads pages through a session's threads: the primary first, then
// its children oldest first; the cursor is the last thread's id.
func (m *managedAPI) listThreads(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	err := checkQuery(q, "limit", "page", "statuses")
	var p pageQuery
	if err == nil {
		p, err = parsePageQuery(q, 1000, 1000, false)
	}
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	statuses := queryList(q, "statuses")
	for _, st := range statuses {
		if !slices.Contains(threadStatuses, st) {
			m.writeError(w, r, BadRequest("query parameter \"statuses\": unknown status %q (want running, idle, rescheduling or terminated)", st))
			return
		}
	}
	threads, err := m.svc.SessionThreads(r.Context(), tenant(r), r.PathValue("id"))
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	start := 0
	if p.cursor != "" {
		start = slices.IndexFunc(threads, func(t managed.Thread) bool { return t.ID() == p.cursor }) + 1
		if start == 0 {
			m.writeError(w, r, BadRequest("query parameter \"page\" is not a cursor for this session's threads"))
			return
		}
	}
	var page []map[string]any
	more := false
	for _, t := range threads[start:] {
		if len(statuses) > 0 {
			st, err := m.svc.ThreadStatus(r.Context(), t)
			if err != nil {
				m.writeError(w, r, err)
				return
			}
			if !slices.Contains(statuses, st) {
				continue
			}
		}
		if len(page) == p.limit {
			more = true
			break
		}
		js, err := m.svc.ThreadJSON(r.Context(), t)
		if err != nil {
			m.writeError(w, r, err)
			return
		}
		page = append(page, js)
	}
	writePage(w, page, more, func(v map[string]any) string { return v["id"].(string) })
}

func (m *managedAPI) getThread(w http.ResponseWriter, r *http.Request) {
	t, err := m.svc.SessionThread(r.Context(), tenant(r), r.PathValue("id"), r.PathValue("thread_id"))
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	out, err := m.svc.ThreadJSON(r.Context(), t)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (m *managedAPI) archiveThread(w http.ResponseWriter, r *http.Request) {
	out, err := m.svc.ArchiveThread(r.Context(), tenant(r), r.PathValue("id"), r.PathValue("thread_id"))
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// threadLog resolves the thread of the request to the id of its log.
func (m *managedAPI) threadLog(r *http.Request) func() (string, error) {
	return func() (string, error) {
		t, err := m.svc.SessionThread(r.Context(), tenant(r), r.PathValue("id"), r.PathValue("thread_id"))
		if err != nil {
			return "", err
		}
		return t.LogID(), nil
	}
}

// listThreadEvents lists a thread's own events as the session events list
// does (the primary thread's are the session's).
func (m *managedAPI) listThreadEvents(w http.ResponseWriter, r *http.Request) {
	m.listLog(w, r, m.threadLog(r))
}

// getThreadEvent is one event of a thread's own log, as its list shows it
// (agentkernel's own route, beside GET /v1/sessions/{id}/events/{event_id}).
func (m *managedAPI) getThreadEvent(w http.ResponseWriter, r *http.Request) {
	m.getLogEvent(w, r, m.threadLog(r))
}

// streamThreadEvents streams a thread's own events as the session stream
// does.
func (m *managedAPI) streamThreadEvents(w http.ResponseWriter, r *http.Request) {
	m.streamLog(w, r, m.threadLog(r))
}
