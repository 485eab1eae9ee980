package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Agents and environments: their versions and configuration, and the
// sessions that use them.

func (c *Console) registerAgents() {
	c.addNav(navItem{Label: "Agents", Path: Prefix + "/agents"})
	c.mux.HandleFunc("GET "+Prefix+"/agents", c.authed(c.agentList))
	c.mux.HandleFunc("GET "+Prefix+"/agents/{id}", c.authed(c.agentPage))
	c.addNav(navItem{Label: "Environments", Path: Prefix + "/environments"})
	c.mux.HandleFunc("GET "+Prefix+"/environments", c.authed(c.environmentList))
	c.mux.HandleFunc("GET "+Prefix+"/environments/{id}", c.authed(c.environmentPage))
}

// agentJSON is the part of the API's agent the lists show; the page shows
// the whole document too.
type agentJSON struct {
	ID          string     `json:"id"`
	Name        string     `json:"name"`
	Version     int        `json:"version"`
	Description string     `json:"description"`
	ArchivedAt  *time.Time `json:"archived_at"`
	CreatedAt   time.Time  `json:"created_at"`
	UpdatedAt   time.Time  `json:"updated_at"`
	Model       struct {
		ID string `json:"id"`
	} `json:"model"`
	System string `json:"system"`
	// The configuration the agent's page shows part by part.
	Tools             json.RawMessage   `json:"tools"`
	MCPServers        json.RawMessage   `json:"mcp_servers"`
	Skills            json.RawMessage   `json:"skills"`
	Multiagent        json.RawMessage   `json:"multiagent"`
	Metadata          map[string]string `json:"metadata"`
	ExecutionIdentity json.RawMessage   `json:"execution_identity"`
}

// configPart is a part of an agent's configuration, pretty, with how many
// entries it has (-1: not a list).
type configPart struct {
	Label, JSON string
	Count       int
	// Unset: the API says null or an empty list.
	Unset bool
}

// Parts are the agent's tools, MCP servers, skills and multiagent roster.
func (a agentJSON) Parts() []configPart {
	var parts []configPart
	for _, p := range []struct {
		label string
		raw   json.RawMessage
	}{{"Tools", a.Tools}, {"MCP servers", a.MCPServers}, {"Skills", a.Skills}, {"Multiagent roster", a.Multiagent}, {"Execution identity", a.ExecutionIdentity}} {
		cp := configPart{Label: p.label, JSON: pretty(p.raw), Count: -1}
		var list []json.RawMessage
		if json.Unmarshal(p.raw, &list) == nil && list != nil {
			cp.Count = len(list)
		}
		cp.Unset = len(p.raw) == 0 || string(p.raw) == "null" || cp.Count == 0
		parts = append(parts, cp)
	}
	return parts
}

// sessionsOf lists the newest sessions matching q (at most 50).
func (c *Console) sessionsOf(r *http.Request, u *user, q url.Values) ([]sessionJSON, bool, error) {
	q.Set("limit", "50")
	var list struct {
		Data     []sessionJSON `json:"data"`
		NextPage string        `json:"next_page"`
	}
	err := c.call(r.Context(), u, http.MethodGet, "/v1/sessions", q, nil, &list)
	return list.Data, list.NextPage != "", err
}

func (c *Console) agentList(w http.ResponseWriter, r *http.Request, u *user) {
	q := url.Values{"limit": {"100"}}
	archived := r.URL.Query().Get("archived") == "1"
	if archived {
		q.Set("include_archived", "true")
	}
	var list struct {
		Data []agentJSON `json:"data"`
	}
	if err := c.call(r.Context(), u, http.MethodGet, "/v1/agents", q, nil, &list); err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	c.render(w, r, u, http.StatusOK, "agents", map[string]any{"Agents": list.Data, "Archived": archived})
}

// agentVersionsShown bounds the versions an agent's page lists.
const agentVersionsShown = 100

func (c *Console) agentPage(w http.ResponseWriter, r *http.Request, u *user) {
	id := r.PathValue("id")
	// ?version=N shows that version's configuration (the API checks N).
	var q url.Values
	if v := r.URL.Query().Get("version"); v != "" {
		q = url.Values{"version": {v}}
	}
	var raw json.RawMessage
	if err := c.call(r.Context(), u, http.MethodGet, "/v1/agents/"+url.PathEscape(id), q, nil, &raw); err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	var a agentJSON
	_ = json.Unmarshal(raw, &a)
	var versions struct {
		Data     []agentJSON `json:"data"`
		NextPage string      `json:"next_page"`
	}
	if err := c.call(r.Context(), u, http.MethodGet, "/v1/agents/"+url.PathEscape(id)+"/versions", url.Values{"limit": {fmt.Sprint(agentVersionsShown)}}, nil, &versions); err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	latest := a.Version
	if len(versions.Data) > 0 {
		latest = versions.Data[0].Version
	}
	sessions, more, err := c.sessionsOf(r, u, url.Values{"agent_id": {id}, "include_archived": {"true"}})
	if err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	c.render(w, r, u, http.StatusOK, "agent", map[string]any{
		"Agent": a, "Doc": pretty(raw), "Versions": versions.Data, "MoreVersions": versions.NextPage != "",
		"Shown": agentVersionsShown, "Latest": latest, "Sessions": sessions, "More": more,
	})
}

type environmentJSON struct {
	ID          string          `json:"id"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Config      json.RawMessage `json:"config"`
	ArchivedAt  *time.Time      `json:"archived_at"`
	CreatedAt   time.Time       `json:"created_at"`
}

// ConfigType is the environment's kind (cloud or self_hosted).
func (e environmentJSON) ConfigType() string {
	var c struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(e.Config, &c)
	return c.Type
}

func (c *Console) environmentList(w http.ResponseWriter, r *http.Request, u *user) {
	q := url.Values{"limit": {"100"}}
	var list struct {
		Data []environmentJSON `json:"data"`
	}
	if err := c.call(r.Context(), u, http.MethodGet, "/v1/environments", q, nil, &list); err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	c.render(w, r, u, http.StatusOK, "environments", map[string]any{"Environments": list.Data})
}

// environmentSessionsScan bounds how many of the newest sessions the
// environment page looks through for its own (the API filters sessions by
// agent, not by environment).
const environmentSessionsScan = 100

func (c *Console) environmentPage(w http.ResponseWriter, r *http.Request, u *user) {
	id := r.PathValue("id")
	var raw json.RawMessage
	if err := c.call(r.Context(), u, http.MethodGet, "/v1/environments/"+url.PathEscape(id), nil, nil, &raw); err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	var e environmentJSON
	_ = json.Unmarshal(raw, &e)
	var list struct {
		Data []sessionJSON `json:"data"`
	}
	if err := c.call(r.Context(), u, http.MethodGet, "/v1/sessions", url.Values{"limit": {fmt.Sprint(environmentSessionsScan)}, "include_archived": {"true"}}, nil, &list); err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	var sessions []sessionJSON
	for _, s := range list.Data {
		if s.EnvironmentID == id {
			sessions = append(sessions, s)
		}
	}
	c.render(w, r, u, http.StatusOK, "environment", map[string]any{
		"Environment": e, "Doc": pretty(raw), "Sessions": sessions, "Scanned": len(list.Data), "Scan": environmentSessionsScan,
	})
}
