package api

import (
	"context"
	"net/http"

	"github.com/agentkernel/agentkernel/internal/managed"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Deployments and their runs (issue 14), as the SDK's
// client.Beta.Deployments and client.Beta.DeploymentRuns call them.
func (s *Server) registerDeploymentRoutes(m *managedAPI) {
	a := s.authenticated
	s.mux.HandleFunc("POST /v1/deployments", a(s.noQuery(m.withBody(m.svc.CreateDeployment))))
	s.mux.HandleFunc("GET /v1/deployments", a(m.listDeployments))
	s.mux.HandleFunc("GET /v1/deployments/{id}", a(s.noQuery(m.byID(m.svc.GetDeployment))))
	s.mux.HandleFunc("POST /v1/deployments/{id}", a(s.noQuery(m.byIDWithBody(m.svc.UpdateDeployment))))
	s.mux.HandleFunc("POST /v1/deployments/{id}/archive", a(s.noQuery(m.byID(m.svc.ArchiveDeployment))))
	s.mux.HandleFunc("POST /v1/deployments/{id}/pause", a(s.noQuery(m.byID(m.svc.PauseDeployment))))
	s.mux.HandleFunc("POST /v1/deployments/{id}/unpause", a(s.noQuery(m.byID(m.svc.UnpauseDeployment))))
	s.mux.HandleFunc("POST /v1/deployments/{id}/run", a(s.noQuery(m.byID(m.svc.RunDeployment))))
	s.mux.HandleFunc("GET /v1/deployment_runs", a(m.listDeploymentRuns))
	s.mux.HandleFunc("GET /v1/deployment_runs/{id}", a(s.noQuery(m.byID(m.svc.GetDeploymentRun))))
}

type (
	bodyCall   func(ctx context.Context, tenantID string, in managed.Obj) (map[string]any, error)
	idCall     func(ctx context.Context, tenantID, id string) (map[string]any, error)
	idBodyCall func(ctx context.Context, tenantID, id string, in managed.Obj) (map[string]any, error)
)

func (m *managedAPI) answer(w http.ResponseWriter, r *http.Request, out map[string]any, err error) {
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (m *managedAPI) withBody(f bodyCall) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		in, err := decodeObject(r)
		if err != nil {
			m.writeError(w, r, err)
			return
		}
		out, err := f(r.Context(), tenant(r), in)
		m.answer(w, r, out, err)
	}
}

func (m *managedAPI) byID(f idCall) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		out, err := f(r.Context(), tenant(r), r.PathValue("id"))
		m.answer(w, r, out, err)
	}
}

func (m *managedAPI) byIDWithBody(f idBodyCall) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		in, err := decodeObject(r)
		if err != nil {
			m.writeError(w, r, err)
			return
		}
		out, err := f(r.Context(), tenant(r), r.PathValue("id"), in)
		m.answer(w, r, out, err)
	}
}

func (m *managedAPI) listDeployments(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p, err := parsePageQuery(q, 20, 100, false)
	if err == nil {
		err = checkQuery(q, withCursor("include_archived", "agent_id", "status")...)
	}
	var archived bool
	if err == nil {
		archived, err = queryBool(q, "include_archived")
	}
	var paused *bool
	if err == nil {
		switch st := q.Get("status"); {
		case st == "":
		case st != "active" && st != "paused":
			err = BadRequest("query parameter \"status\" must be active or paused, got %q", st)
		case archived:
			err = BadRequest("query parameters \"status\" and \"include_archived\" cannot be combined")
		default:
			v := st == "paused"
			paused = &v
		}
	}
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	page, more, err := collectPage(p.limit, p.cursor, func(after string, n int) ([]*store.Deployment, error) {
		lp := store.ListDeploymentsParams{Paused: paused, ListResourcesParams: store.ListResourcesParams{Limit: n,
			IncludeArchived: archived, AgentID: q.Get("agent_id"), Descending: p.desc}}
		if p.desc {
			lp.BeforeID = after
		} else {
			lp.AfterID = after
		}
		return m.svc.ListDeployments(r.Context(), tenant(r), lp)
	}, func(d *store.Deployment) string { return d.ID }, func(d *store.Deployment) bool { return p.inTime(d.CreatedAt) })
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	out := make([]map[string]any, 0, len(page))
	for _, d := range page {
		v, err := m.svc.DeploymentJSON(d)
		if err != nil {
			m.writeError(w, r, err)
			return
		}
		out = append(out, v)
	}
	writePage(w, out, more, func(v map[string]any) string { return v["id"].(string) })
}

func (m *managedAPI) listDeploymentRuns(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p, err := parsePageQuery(q, 20, 1000, false)
	if err == nil {
		err = checkQuery(q, withCursor("deployment_id", "has_error", "trigger_type")...)
	}
	lp := store.ListDeploymentRunsParams{DeploymentID: q.Get("deployment_id"), Trigger: q.Get("trigger_type")}
	if err == nil && lp.Trigger != "" && lp.Trigger != store.TriggerSchedule && lp.Trigger != store.TriggerManual {
		err = BadRequest("query parameter \"trigger_type\" must be schedule or manual, got %q", lp.Trigger)
	}
	if err == nil && q.Get("has_error") != "" {
		var v bool
		v, err = queryBool(q, "has_error")
		lp.HasError = &v
	}
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	page, more, err := collectPage(p.limit, p.cursor, func(after string, n int) ([]*store.DeploymentRun, error) {
		x := lp
		x.Limit, x.Descending = n, p.desc
		if p.desc {
			x.BeforeID = after
		} else {
			x.AfterID = after
		}
		return m.svc.ListDeploymentRuns(r.Context(), tenant(r), x)
	}, func(d *store.DeploymentRun) string { return d.ID }, func(d *store.DeploymentRun) bool { return p.inTime(d.CreatedAt) })
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	out := make([]map[string]any, 0, len(page))
	for _, d := range page {
		out = append(out, managed.DeploymentRunJSON(d))
	}
	writePage(w, out, more, func(v map[string]any) string { return v["id"].(string) })
}
