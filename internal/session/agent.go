package session

import (
	"encoding/json"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/tools"
)

// agentSpec is what a turn needs from the agent's document.
type agentSpec struct {
	Model  string
	System string
	Tools  *tools.Config
	// MCPServers are the agent's MCP servers' URLs by name.
	MCPServers map[string]string
	// Roster are the agents a coordinator may open threads with (its
	// multiagent roster, resolved to versions when the agent was saved).
	Roster []rosterRef
}

// rosterRef is one resolved roster entry.
type rosterRef struct {
	ID      string `json:"id"`
	Version int64  `json:"version"`
}

// parseAgent reads an agent document. model is an object with an id (the
// SDK's BetaManagedAgentsModelConfig); a bare string is accepted too.
func parseAgent(a *store.Agent) (*agentSpec, error) {
	var doc struct {
		Model  json.RawMessage `json:"model"`
		System string          `json:"system"`
		Tools  json.RawMessage `json:"tools"`
		MCP    []struct {
			Name string `json:"name"`
			URL  string `json:"url"`
		} `json:"mcp_servers"`
		Multiagent *struct {
			Type   string      `json:"type"`
			Agents []rosterRef `json:"agents"`
		} `json:"multiagent"`
	}
	if err := json.Unmarshal(a.Doc, &doc); err != nil {
		return nil, fmt.Errorf("agent %s: %w", a.ID, err)
	}
	spec := &agentSpec{System: doc.System, MCPServers: map[string]string{}}
	if ma := doc.Multiagent; ma != nil && ma.Type == "coordinator" {
		spec.Roster = ma.Agents
	}
	for _, s := range doc.MCP {
		spec.MCPServers[s.Name] = s.URL
	}
	var m struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(doc.Model, &m) != nil || m.ID == "" {
		_ = json.Unmarshal(doc.Model, &spec.Model)
	} else {
		spec.Model = m.ID
	}
	if spec.Model == "" {
		return nil, fmt.Errorf("agent %s version %d has no model id", a.ID, a.Version)
	}
	tc, err := tools.Parse(doc.Tools)
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", a.ID, err)
	}
	spec.Tools = tc
	return spec, nil
}
