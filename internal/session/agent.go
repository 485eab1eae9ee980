package session

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/tools"
)

// agentSpec is what a turn needs from the agent's document.
type agentSpec struct {
	Model  string
	System string
	Tools  *tools.Config
}

// parseAgent reads an agent document. model is an object with an id (the
// SDK's BetaManagedAgentsModelConfig); a bare string is accepted too.
func parseAgent(a *store.Agent) (*agentSpec, error) {
	var doc struct {
		Model  json.RawMessage `json:"model"`
		System string          `json:"system"`
		Tools  json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(a.Doc, &doc); err != nil {
		return nil, fmt.Errorf("agent %s: %w", a.ID, err)
	}
	spec := &agentSpec{System: doc.System}
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

// Environment metadata keys that override the [sandbox] defaults.
const (
	MetaDriver     = "agentkernel.driver"
	MetaImage      = "agentkernel.image"
	MetaSleepAfter = "agentkernel.sleep_after"
	MetaNetwork    = "agentkernel.network"
)

// envSpec is the sandbox configuration an environment asks for; empty
// fields keep the sandbox layer's defaults. The SDK's networking config is
// not mapped: only agentkernel.network widens the sandbox's network, so an
// environment never gets the host network by default.
type envSpec struct {
	Driver     string
	Image      string
	Network    string
	SleepAfter time.Duration
}

func parseEnvironment(e *store.Environment) (envSpec, error) {
	var doc struct {
		Metadata map[string]string `json:"metadata"`
	}
	var spec envSpec
	if len(e.Doc) > 0 {
		if err := json.Unmarshal(e.Doc, &doc); err != nil {
			return spec, fmt.Errorf("environment %s: %w", e.ID, err)
		}
	}
	spec.Driver = doc.Metadata[MetaDriver]
	spec.Image = doc.Metadata[MetaImage]
	spec.Network = doc.Metadata[MetaNetwork]
	if v := doc.Metadata[MetaSleepAfter]; v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return spec, fmt.Errorf("environment %s: metadata %s = %q: not a duration such as 5m", e.ID, MetaSleepAfter, v)
		}
		spec.SleepAfter = d
	}
	return spec, nil
}
