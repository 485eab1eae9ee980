package managed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// sessionDoc is a session's stored body. Agent is the snapshot of the agent
// version the session runs (with any agent_with_overrides applied), in the
// SDK's BetaManagedAgentsSessionAgent shape: the runtime runs this, not
// whatever the agent became later.
type sessionDoc struct {
	Title     *string           `json:"title"`
	Metadata  map[string]string `json:"metadata"`
	Agent     json.RawMessage   `json:"agent"`
	Resources json.RawMessage   `json:"resources"`
	VaultIDs  []string          `json:"vault_ids"`
	Budget    json.RawMessage   `json:"budget"`
	// DeploymentID names the deployment whose run created the session.
	DeploymentID string `json:"deployment_id,omitempty"`
}

const (
	maxSessionTitle  = 512
	maxInitialEvents = 50
	defaultUsageJSON = `{"input_tokens":0,"output_tokens":0,"cache_read_input_tokens":0,"cache_creation":{"ephemeral_1h_input_tokens":0,"ephemeral_5m_input_tokens":0}}`
)

// agentRef is the session's agent field as sent: an id string, {type:
// "agent", id, version?} or {type: "agent_with_overrides", id, version?,
// system?, model?, tools?, mcp_servers?, skills?}.
type agentRef struct {
	id        string
	version   int64
	overrides Obj // only the override fields, empty when none
}

func parseAgentRef(in Obj) (agentRef, error) {
	if !in.Set("agent") {
		return agentRef{}, badRequest("field \"agent\" is required: an agent id, or {\"type\": \"agent\", \"id\": …, \"version\": …}")
	}
	var id string
	if json.Unmarshal(in.Raw("agent"), &id) == nil {
		if id == "" {
			return agentRef{}, badRequest("field \"agent\" must not be empty")
		}
		return agentRef{id: id, overrides: in.Sub("agent", map[string]json.RawMessage{})}, nil
	}
	a, _, err := in.Object("agent")
	if err != nil {
		return agentRef{}, badRequest("field \"agent\" must be an agent id string or an object")
	}
	ref := agentRef{overrides: a.Sub("agent", map[string]json.RawMessage{})}
	if ref.id, err = a.ReqStr("id"); err != nil {
		return ref, err
	}
	v, ok, err := a.Int("version")
	if err != nil {
		return ref, err
	}
	if ok && v < 1 {
		return ref, badRequest("field \"agent.version\" must be at least 1")
	}
	ref.version = v
	typ, err := a.Str("type")
	if err != nil {
		return ref, err
	}
	switch typ {
	case "", "agent":
	case "agent_with_overrides":
		// The overrides are parsed as agent fields; keys other than these
		// stay unread in a and are refused as unknown.
		for _, k := range []string{"system", "model", "tools", "mcp_servers", "skills"} {
			if a.Has(k) {
				ref.overrides.Map()[k] = a.Raw(k)
			}
		}
	default:
		return ref, badRequest("field \"agent.type\": unknown type %q (want agent or agent_with_overrides)", typ)
	}
	return ref, nil
}

// sessionJSON renders the SDK's BetaManagedAgentsSession.
func sessionJSON(s *store.ManagedSession, d sessionDoc, status string, now time.Time) map[string]any {
	var archived any
	if s.ArchivedAt != nil {
		archived = s.ArchivedAt.UTC()
	}
	end := now
	if s.TerminatedAt != nil {
		end = *s.TerminatedAt
	}
	usage := json.RawMessage(defaultUsageJSON)
	if len(s.Usage) > 0 {
		usage = s.Usage
	}
	vaults := d.VaultIDs
	if vaults == nil {
		vaults = []string{}
	}
	out := map[string]any{
		"id": s.ID, "type": "session", "status": status,
		"agent": orDefault(d.Agent, json.RawMessage(`null`)), "environment_id": s.EnvironmentID,
		"title": d.Title, "metadata": orEmptyMap(d.Metadata),
		"resources": orEmptyArray(d.Resources), "vault_ids": vaults,
		"budget": orDefault(d.Budget, json.RawMessage(`null`)), "deployment_id": nilIfEmpty(d.DeploymentID),
		"outcome_evaluations": []any{},
		"stats":               map[string]float64{"active_seconds": s.ActiveSeconds, "duration_seconds": end.Sub(s.CreatedAt).Seconds()},
		"usage":               usage,
		"created_at":          s.CreatedAt.UTC(), "updated_at": s.UpdatedAt.UTC(), "archived_at": archived,
	}
	if l := LineageJSON(s); l != nil {
		// agentkernel's own: a fork's source, or the session an abandoned
		// branch was cut from.
		out["lineage"] = l
	}
	return out
}

func decodeSessionDoc(b []byte) (sessionDoc, error) {
	var d sessionDoc
	if err := json.Unmarshal(b, &d); err != nil {
		return d, fmt.Errorf("stored session doc: %w", err)
	}
	return d, nil
}

// refuseSessionExtras refuses the session fields the SDK defines and the
// runtime does not act on yet; their empty values are accepted. (A
// session's resources are read by buildSessionResources.)
func refuseSessionExtras(in Obj) error {
	return firstErr(
		in.NotYetUnlessEmpty("budget", "agentkernel does not price model usage, so no budget can stop a session; send null or leave it out"),
	)
}

// maxSessionVaults bounds a session's vault_ids.
const maxSessionVaults = 16

// applyVaultIDs reads vault_ids (create, or an update that sends it: the
// list replaces the stored one). Each must be a vault of the tenant that
// is not archived; the session's egress rules and tool environment follow
// the new list from the next tool call.
func (s *Service) applyVaultIDs(ctx context.Context, in Obj, d *sessionDoc, tenantID string) error {
	if !in.Has("vault_ids") {
		return nil
	}
	list, err := in.Strings("vault_ids")
	if err != nil {
		return err
	}
	if len(list) > maxSessionVaults {
		return badRequest("field %q has %d entries; the limit is %d", in.Field("vault_ids"), len(list), maxSessionVaults)
	}
	seen := map[string]bool{}
	for i, id := range list {
		switch {
		case id == "":
			return badRequest("field \"%s[%d]\" is empty; give a vault id (vlt_…)", in.Field("vault_ids"), i)
		case seen[id]:
			return badRequest("field \"%s[%d]\": vault %q is listed twice", in.Field("vault_ids"), i, id)
		}
		seen[id] = true
	}
	if len(list) > 0 {
		if s.vaults == nil {
			return in.NotYet("vault_ids", "this daemon runs without vaults")
		}
		if err := s.vaults.CheckVaults(ctx, tenantID, list); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return inputErr(http.StatusNotFound, "field %q: %v", in.Field("vault_ids"), err)
			}
			return err
		}
	}
	d.VaultIDs = list
	return nil
}

// LineageJSON is how a session came to be: null for a plain one.
func LineageJSON(s *store.ManagedSession) any {
	l := s.Lineage
	if l.ForkedFrom == "" && l.BranchOf == "" {
		return nil
	}
	out := map[string]any{}
	if l.ForkedFrom != "" {
		out["forked_from"] = map[string]any{"session_id": l.ForkedFrom, "at_seq": l.ForkedAtSeq}
	}
	if l.BranchOf != "" {
		out["branch_of"] = map[string]any{"session_id": l.BranchOf, "at_seq": l.BranchAtSeq, "branched_at": l.BranchedAt}
	}
	return out
}

// nilIfEmpty is JSON null for "".
func nilIfEmpty(v string) any {
	if v == "" {
		return nil
	}
	return v
}

// SessionDeploymentID is the deployment whose run created the session
// ("" when none did).
func SessionDeploymentID(ms *store.ManagedSession) string {
	var d struct {
		DeploymentID string `json:"deployment_id"`
	}
	_ = json.Unmarshal(ms.Doc, &d)
	return d.DeploymentID
}
