package api

import (
	"errors"
	"net/http"
	"strings"

	"github.com/agentkernel/agentkernel/internal/resources"
	"github.com/agentkernel/agentkernel/internal/store"
)

// This file serves a session's resources: `resources` at session create
// and /v1/sessions/{id}/resources (anthropic-sdk-go's
// Beta.Sessions.Resources). The handlers decode and encode; the checks and
// the sandbox work are internal/resources'.

func (s *Server) registerResourceRoutes(m *managedAPI) {
	a := s.authenticated
	s.mux.HandleFunc("POST /v1/sessions/{id}/resources", a(s.noQuery(m.addResource)))
	s.mux.HandleFunc("GET /v1/sessions/{id}/resources", a(s.query(m.listResources, "limit", "page")))
	s.mux.HandleFunc("GET /v1/sessions/{id}/resources/{rid}", a(s.noQuery(m.getResource)))
	s.mux.HandleFunc("POST /v1/sessions/{id}/resources/{rid}", a(s.noQuery(m.updateResource)))
	s.mux.HandleFunc("DELETE /v1/sessions/{id}/resources/{rid}", a(s.noQuery(m.deleteResource)))
}

// parseResourceSpec reads one resource as the SDK sends it.
func parseResourceSpec(o obj) (resources.Spec, error) {
	var sp resources.Spec
	var err error
	if sp.Type, err = o.ReqStr("type"); err != nil {
		return sp, err
	}
	str := func(k string, dst *string) {
		if err == nil {
			*dst, err = o.Str(k)
		}
	}
	if o.Set("mount_path") {
		str("mount_path", &sp.MountPath)
		if err == nil && sp.MountPath == "" {
			err = BadRequest("field %q must not be empty; leave it out for the default", o.Field("mount_path"))
		}
	}
	switch sp.Type {
	case resources.KindFile:
		str("file_id", &sp.FileID)
	case resources.KindGitHub:
		str("url", &sp.URL)
		str("authorization_token", &sp.Token)
		var co obj
		var ok bool
		if err == nil {
			co, ok, err = o.Object("checkout")
		}
		if err == nil && ok {
			if sp.CheckoutType, err = co.ReqStr("type"); err == nil {
				switch sp.CheckoutType {
				case "branch":
					sp.CheckoutName, err = co.ReqStr("name")
				case "commit":
					sp.CheckoutSHA, err = co.ReqStr("sha")
				}
			}
		}
	case resources.KindMemoryStore:
		str("memory_store_id", &sp.MemoryStoreID)
		str("access", &sp.Access)
		str("instructions", &sp.Instructions)
	}
	return sp, err
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

// buildSessionResources checks the create request's resources; the rows
// are written once the session exists.
func (m *managedAPI) buildSessionResources(r *http.Request, in obj, sessionID string) ([]*store.SessionResource, error) {
	if !in.Set("resources") {
		return nil, nil
	}
	list, err := in.Objects("resources")
	if err != nil || len(list) == 0 {
		return nil, err
	}
	if m.resources == nil {
		return nil, in.NotYet("resources", "this daemon runs without session resources")
	}
	specs := make([]resources.Spec, len(list))
	for i, o := range list {
		if specs[i], err = parseResourceSpec(o); err != nil {
			return nil, err
		}
	}
	rs, err := m.resources.Build(r.Context(), tenant(r), sessionID, in.Field("resources"), specs)
	return rs, inputErr(err)
}

// sessionResourcesJSON renders a session's resources for the session body.
func (m *managedAPI) sessionResourcesJSON(r *http.Request, sessionID string) ([]map[string]any, error) {
	out := []map[string]any{}
	if m.resources == nil {
		return out, nil
	}
	rs, err := m.resources.List(r.Context(), sessionID)
	if err != nil {
		return nil, err
	}
	for _, x := range rs {
		out = append(out, resources.Render(x))
	}
	return out, nil
}

// resourceSession reads the path's session; changes need it writable.
func (m *managedAPI) resourceSession(r *http.Request, change bool) (*store.ManagedSession, error) {
	if m.resources == nil {
		return nil, Errorf(http.StatusNotFound, TypeNotFound, "session resources are not supported by this daemon")
	}
	s, err := m.sessionFor(r, r.PathValue("id"))
	if err == nil && change {
		err = writable(s)
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
	sp, err := parseResourceSpec(in)
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
