package managed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/skills"
	"github.com/agentkernel/agentkernel/internal/store"
)

// maxAgentSkills bounds an agent's skills: each adds its description to
// every model call's system prompt.
const maxAgentSkills = 64

// skillResolver turns a skill reference into the concrete version it pins
// ("" or "latest" → the newest), or an error; nil refuses skills.
type skillResolver func(skillID, version string) (string, error)

// skillsFor resolves skills of the caller's tenant; another tenant's skill
// answers like a missing one.
func (s *Service) skillsFor(ctx context.Context, tenantID string) skillResolver {
	if s.skills == nil {
		return nil
	}
	return func(id, version string) (string, error) {
		if version == "" {
			version = "latest"
		}
		v, err := s.skills.Version(ctx, tenantID, id, version)
		if err != nil {
			return "", err
		}
		return v.Version, nil
	}
}

// normalizeSkills reads an agent's skills (the SDK's
// BetaManagedAgentsSkillParamsUnion) and pins each to a concrete version,
// the shape the SDK's BetaManagedAgentsCustomSkill returns.
func normalizeSkills(in Obj, resolve skillResolver) (json.RawMessage, error) {
	list, err := in.Objects("skills")
	if err != nil || list == nil {
		return json.RawMessage(`[]`), err
	}
	if len(list) == 0 {
		return json.RawMessage(`[]`), nil
	}
	if resolve == nil {
		return nil, in.NotYet("skills", "this daemon serves no skills; send [] or leave it out")
	}
	if len(list) > maxAgentSkills {
		return nil, badRequest("field %q has %d skills; the limit is %d", in.Field("skills"), len(list), maxAgentSkills)
	}
	out := make([]skills.SkillRef, 0, len(list))
	seen := map[string]string{}
	for _, o := range list {
		typ, err := o.ReqStr("type")
		if err != nil {
			return nil, err
		}
		switch typ {
		case "custom":
		case "anthropic":
			return nil, o.NotYet("type", "agentkernel has no Anthropic-managed skills; upload the skill with /v1/skills and use {\"type\": \"custom\"}")
		default:
			return nil, badRequest("field %q: unknown skill type %q (want custom)", o.Field("type"), typ)
		}
		id, err := o.ReqStr("skill_id")
		if err != nil {
			return nil, err
		}
		version, err := o.Str("version")
		if err != nil {
			return nil, err
		}
		if prev, ok := seen[id]; ok {
			return nil, badRequest("field %q: skill %q is already listed at %s", o.Field("skill_id"), id, prev)
		}
		seen[id] = o.Field("skill_id")
		pinned, err := resolve(id, version)
		if errors.Is(err, store.ErrNotFound) {
			if _, serr := resolve(id, "latest"); serr != nil {
				return nil, badRequest("field %q: skill %q not found", o.Field("skill_id"), id)
			}
			return nil, badRequest("field %q: skill %q has no version %q", o.Field("version"), id, version)
		}
		if err != nil {
			return nil, fmt.Errorf("resolve skill %s: %w", id, err)
		}
		out = append(out, skills.SkillRef{Type: "custom", SkillID: id, Version: pinned})
	}
	return MustJSON(out), nil
}
