package api

import (
	"errors"
	"net/http"
	"strings"

	"github.com/agentkernel/agentkernel/internal/managed"
	"github.com/agentkernel/agentkernel/internal/resources"
	"github.com/agentkernel/agentkernel/internal/store"
)

// This file serves a session's resources: `resources` at session create
// and /v1/sessions/{id}/resources (anthropic-sdk-go's
// Beta.Sessions.Resources). The handlers decode and encode; the checks and
// the sandbox work are internal/resources'.

func (s *Server) registerResourceRoutes(m *managedAPI) {
	a := s.authenticated
	oa := func(h http.HandlerFunc) http.HandlerFunc { return a(s.sessionOwner(h)) }
	s.mux.HandleFunc("POST /v1/sessions/{id}/resources", oa(s.noQuery(m.addResource)))
	s.mux.HandleFunc("GET /v1/sessions/{id}/resources", oa(s.query(m.listResources, "limit", "page")))
	s.mux.HandleFunc("GET /v1/sessions/{id}/resources/{rid}", oa(s.noQuery(m.getResource)))
	s.mux.HandleFunc("POST /v1/sessions/{id}/resources/{rid}", oa(s.noQuery(m.updateResource)))
	s.mux.HandleFunc("DELETE /v1/sessions/{id}/resources/{rid}", oa(s.noQuery(m.deleteResource)))
}

// inputErr turns the resources layer's bad input into the API's error.
func inputErr(err error) error {
	var ie *resources.InputError
	if !errors.As(err, &ie) {
		return err
	}
	typ := TypeInvalidRequest
	switch ie.Status {
	case http.StatusNotFound:
		typ = TypeNotFound
	case http.StatusConflict:
		typ = TypeConflict
	}
	return Errorf(ie.Status, typ, "%s", ie.Error())
}

// resourceSession reads the path's session; changes need it writable.
func (m *managedAPI) resourceSession(r *http.Request, change bool) (*store.ManagedSession, error) {
	if m.resources == nil {
		return nil, Errorf(http.StatusNotFound, TypeNotFound, "session resources are not supported by this daemon")
	}
	s, err := m.sessionFor(r, r.PathValue("id"))
	if err == nil && change {
		err = managed.Writable(s)
	}
	if err == nil && change {
		if hosted, herr := m.svc.SelfHostedSession(r.Context(), s); herr != nil {
			err = herr
		} else if hosted {
			err = BadRequest("session %s runs in a self_hosted environment: its resources are not supported yet (the daemon cannot mount them into a worker's directory)", s.ID)
		}
	}
	return s, err
}

func (m *managedAPI) resourceFor(r *http.Request, s *store.ManagedSession) (*store.SessionResource, error) {
	id := r.PathValue("rid")
	x, err := m.resources.Get(r.Context(), s.ID, id)
	return x, notFoundAs("session resource", id, err)
}

func (m *managedAPI) addResource(w http.ResponseWriter, r *http.Request) {
	s, err := m.resourceSession(r, true)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	in, err := decodeObject(r)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	sp, err := managed.ParseResourceSpec(in)
	if err == nil {
		err = in.Strict()
	}
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	x, err := m.resources.Add(r.Context(), s, sp)
	if err != nil {
		m.writeError(w, r, inputErr(err))
		return
	}
	writeJSON(w, http.StatusOK, resources.Render(x))
}

func (m *managedAPI) listResources(w http.ResponseWriter, r *http.Request) {
	s, err := m.resourceSession(r, false)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	// The SDK: "if omitted, returns all resources" (max 1000 a page).
	p, err := parsePageQuery(r.URL.Query(), resources.MaxResources, 1000, false)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	page, more, err := collectPage(p.limit, p.cursor, func(after string, n int) ([]*store.SessionResource, error) {
		return m.resources.Page(r.Context(), s.ID, after, n)
	}, func(x *store.SessionResource) string { return x.ID }, func(*store.SessionResource) bool { return true })
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	out := make([]map[string]any, 0, len(page))
	for _, x := range page {
		out = append(out, resources.Render(x))
	}
	writePage(w, out, more, func(v map[string]any) string { return v["id"].(string) })
}

func (m *managedAPI) getResource(w http.ResponseWriter, r *http.Request) {
	s, err := m.resourceSession(r, false)
	var x *store.SessionResource
	if err == nil {
		x, err = m.resourceFor(r, s)
	}
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, resources.Render(x))
}

// updateResource rotates a repository's authorization_token (the only
// field the SDK lets a resource change).
func (m *managedAPI) updateResource(w http.ResponseWriter, r *http.Request) {
	s, err := m.resourceSession(r, true)
	var x *store.SessionResource
	if err == nil {
		x, err = m.resourceFor(r, s)
	}
	var in obj
	if err == nil {
		in, err = decodeObject(r)
	}
	var token string
	if err == nil {
		token, err = in.ReqStr("authorization_token")
	}
	if err == nil {
		err = in.Strict()
	}
	if err == nil {
		x, err = m.resources.UpdateToken(r.Context(), x, strings.TrimSpace(token))
		err = inputErr(err)
	}
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, resources.Render(x))
}

func (m *managedAPI) deleteResource(w http.ResponseWriter, r *http.Request) {
	s, err := m.resourceSession(r, true)
	var x *store.SessionResource
	if err == nil {
		x, err = m.resourceFor(r, s)
	}
	if err == nil {
		err = notFoundAs("session resource", x.ID, m.resources.Delete(r.Context(), x))
	}
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"id": x.ID, "type": "session_resource_deleted"})
}
