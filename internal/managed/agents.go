package managed

import (
	"bytes"
	"context"
	"errors"
	"net/http"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Agent reads an agent version the tenant owns (0: the latest); another
// tenant's agent answers exactly like a missing one.
func (s *Service) Agent(ctx context.Context, tenantID, id string, version int64) (*store.Agent, error) {
	a, err := s.st.GetAgent(ctx, id, version)
	if errors.Is(err, store.ErrNotFound) && version > 0 {
		if latest, lerr := s.st.GetAgent(ctx, id, 0); lerr == nil && latest.TenantID == tenantID {
			return nil, inputErr(http.StatusNotFound, "agent %q has no version %d; its latest version is %d", id, version, latest.Version)
		}
	}
	if err == nil && a.TenantID != tenantID {
		err = store.ErrNotFound
	}
	if err != nil {
		return nil, notFoundAs("agent", id, err)
	}
	return a, nil
}

// AgentJSON renders a stored agent version as the SDK's
// BetaManagedAgentsAgent.
func AgentJSON(a *store.Agent) (map[string]any, error) {
	d, err := decodeAgentDoc(a.Doc)
	if err != nil {
		return nil, err
	}
	return toAgentJSON(a, d), nil
}

func toAgentJSON(a *store.Agent, d agentDoc) map[string]any {
	var archived any
	if a.ArchivedAt != nil {
		archived = a.ArchivedAt.UTC()
	}
	return agentJSON(a.ID, a.Version, d, a.CreatedAt.UTC(), a.UpdatedAt.UTC(), archived)
}

// CreateAgent creates version 1 of an agent from a create body.
func (s *Service) CreateAgent(ctx context.Context, tenantID string, in Obj) (map[string]any, error) {
	// The id is chosen here, not by the store, so a roster's self entry
	// can name it.
	id := ids.New("agent")
	d := newAgentDoc()
	err := applyAgentFields(in, &d, true, s.skillsFor(ctx, tenantID))
	if err == nil {
		err = s.applyMultiagent(ctx, tenantID, in, &d, agentSelf{id: id, version: 1})
	}
	if err == nil {
		err = in.Strict()
	}
	if err != nil {
		return nil, err
	}
	a, err := s.st.CreateAgent(ctx, &store.Agent{ID: id, TenantID: tenantID, Doc: MustJSON(d)})
	if err != nil {
		return nil, err
	}
	return toAgentJSON(a, d), nil
}

// GetAgent renders an agent version the tenant owns (0: the latest).
func (s *Service) GetAgent(ctx context.Context, tenantID, id string, version int64) (map[string]any, error) {
	a, err := s.Agent(ctx, tenantID, id, version)
	if err != nil {
		return nil, err
	}
	return AgentJSON(a)
}

// UpdateAgent writes a new version. With "version" in the body the update
// applies only if it is still the current version (409 otherwise);
// without it the update applies to whatever is current. An update that
// changes nothing creates no version.
func (s *Service) UpdateAgent(ctx context.Context, tenantID, id string, in Obj) (map[string]any, error) {
	expected, pinned, err := in.Int("version")
	if err == nil && pinned && expected < 1 {
		err = badRequest("field \"version\" must be at least 1")
	}
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		cur, err := s.Agent(ctx, tenantID, id, 0)
		if err != nil {
			return nil, err
		}
		if cur.ArchivedAt != nil {
			return nil, conflict("agent %q is archived; archived agents cannot be updated", id)
		}
		if pinned && cur.Version != expected {
			return nil, conflict("agent %q is at version %d, not %d (field \"version\"); retrieve it and apply your change again", id, cur.Version, expected)
		}
		d, err := decodeAgentDoc(cur.Doc)
		if err == nil {
			err = applyAgentFields(in, &d, false, s.skillsFor(ctx, tenantID))
		}
		if err == nil {
			// A self entry resolves to the current version first, so an
			// update that changes nothing still compares equal to it.
			err = s.applyMultiagent(ctx, tenantID, in, &d, agentSelf{id: id, version: cur.Version})
		}
		if err == nil {
			err = in.Strict()
		}
		if err != nil {
			return nil, err
		}
		if bytes.Equal(MustJSON(d), MustJSON(mustDecodeAgent(cur.Doc))) {
			return toAgentJSON(cur, d), nil
		}
		// The new version's self entry (sent or kept) names the new version.
		d.Multiagent = withSelfVersion(d.Multiagent, id, cur.Version+1)
		doc := MustJSON(d)
		a, err := s.st.UpdateAgent(ctx, id, cur.Version, doc)
		if errors.Is(err, store.ErrVersionMismatch) && !pinned && attempt < 5 {
			continue // a concurrent update won; apply ours to the new version
		}
		if errors.Is(err, store.ErrVersionMismatch) {
			err = conflict("agent %q was updated concurrently; retrieve it and apply your change again", id)
		}
		if err != nil {
			return nil, err
		}
		return toAgentJSON(a, d), nil
	}
}

// mustDecodeAgent normalizes a stored doc for comparison.
func mustDecodeAgent(b []byte) agentDoc {
	d, _ := decodeAgentDoc(b)
	return d
}

// ArchiveAgent archives an agent the tenant owns.
func (s *Service) ArchiveAgent(ctx context.Context, tenantID, id string) (map[string]any, error) {
	if _, err := s.Agent(ctx, tenantID, id, 0); err != nil {
		return nil, err
	}
	a, err := s.st.ArchiveAgent(ctx, id, s.clock())
	if err != nil {
		return nil, notFoundAs("agent", id, err)
	}
	return AgentJSON(a)
}

// ListAgents lists the tenant's agents (p's paging and filters).
func (s *Service) ListAgents(ctx context.Context, tenantID string, p store.ListResourcesParams) ([]*store.Agent, error) {
	p.TenantID = tenantID
	return s.st.ListAgents(ctx, p)
}

// AgentVersions is every version of an agent the tenant owns.
func (s *Service) AgentVersions(ctx context.Context, tenantID, id string) ([]*store.Agent, error) {
	if _, err := s.Agent(ctx, tenantID, id, 0); err != nil {
		return nil, err
	}
	versions, err := s.st.ListAgentVersions(ctx, id)
	if err != nil {
		return nil, notFoundAs("agent", id, err)
	}
	return versions, nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
