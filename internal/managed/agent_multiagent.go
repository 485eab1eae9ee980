package managed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/agentkernel/agentkernel/internal/store"
)

// maxRosterAgents bounds a coordinator's roster (the SDK's
// BetaManagedAgentsMultiagentCoordinatorParams: 1 to 20 entries).
const maxRosterAgents = 20

// coordinator is an agent's multiagent field as stored and returned: the
// SDK's BetaManagedAgentsMultiagentCoordinator, every roster entry
// resolved to an agent version.
type coordinator struct {
	Type   string        `json:"type"`
	Agents []rosterAgent `json:"agents"`
}

// rosterAgent is one resolved roster entry, the SDK's
// BetaManagedAgentsAgentReference.
type rosterAgent struct {
	Type    string `json:"type"`
	ID      string `json:"id"`
	Version int64  `json:"version"`
}

// agentSelf is the agent whose multiagent is being written: its id and the
// version being written, what a {"type": "self"} entry resolves to.
type agentSelf struct {
	id      string
	version int64
}

// applyMultiagent reads multiagent (the SDK's
// BetaManagedAgentsMultiagentParamsUnion) onto d: absent preserves, null
// (or the empty {} or []) clears, and a coordinator's roster is resolved
// against the tenant's agents and stored resolved.
func (s *Service) applyMultiagent(ctx context.Context, tenantID string, in Obj, d *agentDoc, self agentSelf) error {
	if !in.Has("multiagent") {
		return nil
	}
	if !in.Set("multiagent") {
		d.Multiagent = json.RawMessage(`null`)
		return nil
	}
	switch v := string(in.Raw("multiagent")); strings.Join(strings.Fields(v), "") {
	case "{}", "[]":
		d.Multiagent = json.RawMessage(`null`)
		return nil
	}
	ma, _, err := in.Object("multiagent")
	if err != nil {
		return err
	}
	typ, err := ma.ReqStr("type")
	if err != nil {
		return err
	}
	switch typ {
	case "coordinator":
	case "multiagent_20261001":
		return ma.NotYet("type", `type multiagent_20261001 (advisor, subagents, workflows); use {"type": "coordinator", "agents": [...]}`)
	default:
		return badRequest("field %q: unknown multiagent type %q (want coordinator)", ma.Field("type"), typ)
	}
	if !ma.Set("agents") {
		return badRequest("field %q is required: 1 to %d agents the coordinator may spawn", ma.Field("agents"), maxRosterAgents)
	}
	list, err := ma.Array("agents")
	if err != nil {
		return err
	}
	if len(list) == 0 {
		return badRequest("field %q must list at least 1 agent", ma.Field("agents"))
	}
	if len(list) > maxRosterAgents {
		return badRequest("field %q has %d agents; the limit is %d", ma.Field("agents"), len(list), maxRosterAgents)
	}
	out := coordinator{Type: "coordinator", Agents: make([]rosterAgent, 0, len(list))}
	seen := map[string]string{} // agent id → the entry that names it
	for i, raw := range list {
		p := fmt.Sprintf("%s[%d]", ma.Field("agents"), i)
		ref, isSelf, err := s.rosterEntry(ctx, tenantID, ma, p, raw, self)
		if err != nil {
			return err
		}
		if prev, ok := seen[ref.ID]; ok {
			if isSelf {
				return badRequest("field %q: {\"type\": \"self\"} is already listed at %s; a roster lists itself at most once", p, prev)
			}
			return badRequest("field %q: agent %q is already listed at %s; entries must name distinct agents", p, ref.ID, prev)
		}
		seen[ref.ID] = p
		out.Agents = append(out.Agents, ref)
	}
	d.Multiagent = MustJSON(out)
	return nil
}

// rosterEntry resolves one roster entry (the SDK's
// BetaManagedAgentsMultiagentRosterEntryParamsUnion) at path p: an agent
// id (its latest version), {"type": "agent", "id", "version"?} or
// {"type": "self"}. It reports whether the entry was self.
func (s *Service) rosterEntry(ctx context.Context, tenantID string, parent Obj, p string, raw json.RawMessage, self agentSelf) (rosterAgent, bool, error) {
	var id string
	var version int64
	versionField := p
	if json.Unmarshal(raw, &id) == nil {
		if strings.TrimSpace(id) == "" {
			return rosterAgent{}, false, badRequest("field %q must not be empty", p)
		}
	} else {
		e, err := parent.Child(p, raw)
		if err != nil {
			return rosterAgent{}, false, badRequest("field %q must be an agent id, {\"type\": \"agent\", \"id\": …} or {\"type\": \"self\"}", p)
		}
		typ, err := e.ReqStr("type")
		if err != nil {
			return rosterAgent{}, false, err
		}
		switch typ {
		case "self":
			return rosterAgent{Type: "agent", ID: self.id, Version: self.version}, true, nil
		case "agent":
		case "advisor":
			return rosterAgent{}, false, e.NotYet("type", "advisor roster entries; list agents ({\"type\": \"agent\", \"id\": …}) or {\"type\": \"self\"}")
		default:
			return rosterAgent{}, false, badRequest("field %q: unknown roster entry type %q (want agent or self)", e.Field("type"), typ)
		}
		if id, err = e.ReqStr("id"); err != nil {
			return rosterAgent{}, false, err
		}
		v, ok, err := e.Int("version")
		if err != nil {
			return rosterAgent{}, false, err
		}
		if ok && v < 1 {
			return rosterAgent{}, false, badRequest("field %q must be at least 1", e.Field("version"))
		}
		version, versionField = v, e.Field("version")
	}
	if id == self.id {
		return rosterAgent{}, false, badRequest("field %q: agent %q is this agent; list it as {\"type\": \"self\"}", p, id)
	}
	a, err := s.st.GetAgent(ctx, id, 0)
	if errors.Is(err, store.ErrNotFound) || (err == nil && a.TenantID != tenantID) {
		return rosterAgent{}, false, inputErr(http.StatusNotFound, "field %q: agent %q not found", p, id)
	}
	if err != nil {
		return rosterAgent{}, false, err
	}
	if a.ArchivedAt != nil {
		return rosterAgent{}, false, conflict("field %q: agent %q is archived; archived agents cannot be in a roster", p, id)
	}
	if version > 0 && version != a.Version {
		latest := a.Version
		a, err = s.st.GetAgent(ctx, id, version)
		if errors.Is(err, store.ErrNotFound) {
			return rosterAgent{}, false, inputErr(http.StatusNotFound, "field %q: agent %q has no version %d; its latest version is %d", versionField, id, version, latest)
		}
		if err != nil {
			return rosterAgent{}, false, err
		}
	}
	d, err := decodeAgentDoc(a.Doc)
	if err != nil {
		return rosterAgent{}, false, err
	}
	if hasMultiagent(d) {
		return rosterAgent{}, false, badRequest("field %q: agent %q version %d has multiagent set itself; a roster's agents must be single agents (one level deep)", p, id, a.Version)
	}
	return rosterAgent{Type: "agent", ID: a.ID, Version: a.Version}, false, nil
}

// hasMultiagent reports an agent version with a multiagent configuration.
func hasMultiagent(d agentDoc) bool {
	v := strings.TrimSpace(string(d.Multiagent))
	return v != "" && v != "null"
}

// withSelfVersion points the roster's self entry, if any, at version v.
// An agent's roster names the agent itself only as self (an explicit
// reference to its own id is refused), so the entry with its own id is
// the self entry; an update moves it to the version it writes.
func withSelfVersion(ma json.RawMessage, id string, v int64) json.RawMessage {
	if len(ma) == 0 {
		return ma
	}
	var c coordinator
	if json.Unmarshal(ma, &c) != nil || c.Type != "coordinator" {
		return ma
	}
	for i := range c.Agents {
		if c.Agents[i].ID == id {
			c.Agents[i].Version = v
			return MustJSON(c)
		}
	}
	return ma
}
