package skills

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"path"
	"strings"
	"sync"

	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/session"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Root is where a session's skills appear in its sandbox: the agent
// toolset's layout (tools/agenttoolset/skills.go in the SDK puts each skill
// under {workdir}/skills/<name>/, the workdir being /workspace here).
const Root = "/workspace/skills"

// Sandboxes reaches a sandbox's guest (the sandbox manager).
type Sandboxes interface {
	Client(ctx context.Context, tenantID, id string, fn func(c *guest.Client) error) error
}

// Hook is the session.ContextHook of skills: Prepare writes the agent's
// skills into the sandbox (through the guest, so nothing the sandbox holds
// decides where the daemon writes), SystemPrompt lists them for the model.
type Hook struct {
	svc       *Service
	sandboxes Sandboxes

	mu sync.Mutex
	// placed remembers, per sandbox, the skill versions written there, so
	// Prepare before every tool call costs a map lookup. A daemon restart
	// forgets it and the skills are written once more (idempotent).
	placed map[string]string
}

// maxPlaced bounds Hook.placed.
const maxPlaced = 10000

// NewHook returns the skills hook.
func NewHook(svc *Service, sandboxes Sandboxes) *Hook {
	return &Hook{svc: svc, sandboxes: sandboxes, placed: map[string]string{}}
}

// SkillRef is one entry of an agent's skills as stored (the SDK's
// BetaManagedAgentsCustomSkill): the version is always a concrete id.
type SkillRef struct {
	Type    string `json:"type"`
	SkillID string `json:"skill_id"`
	Version string `json:"version"`
}

// sessionSkills reads the skills of the session's agent as the session
// holds it (the agent version it started with, with its overrides): the
// agent's skills pinned to concrete versions.
func sessionSkills(s *store.ManagedSession) ([]SkillRef, error) {
	var doc struct {
		Agent struct {
			Skills []SkillRef `json:"skills"`
		} `json:"agent"`
	}
	if err := json.Unmarshal(s.Doc, &doc); err != nil {
		return nil, fmt.Errorf("skills: session %s: %w", s.ID, err)
	}
	return doc.Agent.Skills, nil
}

// agentSkills resolves the session's skills to their versions.
func (h *Hook) agentSkills(ctx context.Context, s *store.ManagedSession, refs []SkillRef) ([]*store.SkillVersion, error) {
	out := make([]*store.SkillVersion, 0, len(refs))
	for _, ref := range refs {
		v, err := h.svc.Version(ctx, s.TenantID, ref.SkillID, ref.Version)
		if err != nil {
			return nil, fmt.Errorf("skill %s version %s of agent %s cannot be loaded (deleted since the agent was made?): %w", ref.SkillID, ref.Version, s.AgentID, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// Prepare writes the agent's skills under Root, each into a fresh
// directory named after the skill, unless this sandbox already has these
// versions.
func (h *Hook) Prepare(ctx context.Context, s *store.ManagedSession, sandboxID string) error {
	refs, err := sessionSkills(s)
	if err != nil {
		return err
	}
	// Versions are immutable, so the pinned list names what the sandbox
	// must hold.
	keyParts := make([]string, len(refs))
	for i, r := range refs {
		keyParts[i] = r.SkillID + "@" + r.Version
	}
	key := strings.Join(keyParts, ",")
	h.mu.Lock()
	done := h.placed[sandboxID] == key
	h.mu.Unlock()
	if done {
		return nil
	}
	vs, err := h.agentSkills(ctx, s, refs)
	if err != nil {
		return err
	}
	for _, v := range vs {
		files, err := h.svc.Files(ctx, v)
		if err != nil {
			return err
		}
		// v.Name passed the front matter rules: one segment of
		// [a-z0-9-], so the directory stays under Root.
		dir := path.Join(Root, v.Name)
		err = h.sandboxes.Client(ctx, s.TenantID, sandboxID, func(c *guest.Client) error {
			if err := c.Remove(ctx, guest.RemoveRequest{Path: dir, Recursive: true}); err != nil {
				return err
			}
			if err := c.Mkdir(ctx, guest.MkdirRequest{Path: dir}); err != nil {
				return err
			}
			for _, f := range files {
				if err := c.WriteFile(ctx, guest.WriteFileRequest{Path: path.Join(dir, f.Path), Data: f.Data, Mode: uint32(f.Mode.Perm())}); err != nil {
					return fmt.Errorf("%s: %w", f.Path, err)
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("skills: put skill %s (%s version %s) into the sandbox at %s: %w", v.Name, v.SkillID, v.Version, dir, err)
		}
	}
	h.mu.Lock()
	if len(h.placed) >= maxPlaced {
		// Sandboxes come and go and nothing tells the hook; forgetting
		// costs one more (idempotent) write per live sandbox.
		clear(h.placed)
	}
	h.placed[sandboxID] = key
	h.mu.Unlock()
	return nil
}

// TurnEnd has nothing to take back: skills are read-only inputs.
func (h *Hook) TurnEnd(context.Context, *store.ManagedSession, string) error { return nil }

// SystemPrompt lists the agent's skills — name, description and where
// SKILL.md is — so the model knows what it can read when a task calls for
// it (the progressive disclosure of Agent Skills: only the front matter
// is in the prompt, the rest stays on disk until read).
func (h *Hook) SystemPrompt(ctx context.Context, s *store.ManagedSession) (string, error) {
	refs, err := sessionSkills(s)
	if err != nil || len(refs) == 0 {
		return "", err
	}
	vs, err := h.agentSkills(ctx, s, refs)
	if err != nil {
		return "", err
	}
	root := Root
	if session.SelfHostedTurn(ctx) {
		// A self_hosted environment's worker (the SDK's) downloads them
		// into skills/ of the tools' working directory.
		root = "skills"
	}
	var b strings.Builder
	b.WriteString("You have skills: folders of instructions, scripts and resources under " + root + "/. ")
	b.WriteString("When a task matches a skill's description, read its SKILL.md first (for example with `cat`) and follow it; it may point to further files in the skill's folder.\n")
	b.WriteString("<available_skills>\n")
	for _, v := range vs {
		fmt.Fprintf(&b, "<skill>\n<name>%s</name>\n<description>%s</description>\n<location>%s</location>\n</skill>\n",
			html.EscapeString(v.Name), html.EscapeString(v.Description), path.Join(root, v.Name, "SKILL.md"))
	}
	b.WriteString("</available_skills>")
	return b.String(), nil
}
