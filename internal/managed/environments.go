package managed

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/session"
	"github.com/agentkernel/agentkernel/internal/store"
)

// envDoc is an environment's stored body in the SDK's response shape
// (anthropic.BetaEnvironment without id, type and timestamps). Metadata
// keys agentkernel.driver, agentkernel.image, agentkernel.sleep_after, …
// override the [sandbox] defaults for sessions in this environment; the
// runtime reads them.
type envDoc struct {
	Name        string            `json:"name"`
	Description *string           `json:"description"`
	Config      json.RawMessage   `json:"config"`
	Metadata    map[string]string `json:"metadata"`
	Scope       string            `json:"scope"`
}

const (
	maxEnvName        = 256
	maxEnvDescription = 2048
)

// EnvironmentJSON renders a stored environment as the SDK's
// BetaEnvironment with its package build.
func (s *Service) EnvironmentJSON(ctx context.Context, e *store.Environment) (map[string]any, error) {
	var d envDoc
	if err := json.Unmarshal(e.Doc, &d); err != nil {
		return nil, err
	}
	return s.envJSON(ctx, e, d, false)
}

// envJSON is the environment with its package build (start: begin the
// build if there is none).
func (s *Service) envJSON(ctx context.Context, e *store.Environment, d envDoc, start bool) (map[string]any, error) {
	out := s.toEnvJSON(e, d)
	b, err := s.envBuild(ctx, e, d, start)
	if err != nil {
		return nil, err
	}
	out["packages_build"] = b
	return out, nil
}

func (s *Service) toEnvJSON(e *store.Environment, d envDoc) map[string]any {
	var archived any
	if e.ArchivedAt != nil {
		archived = e.ArchivedAt.UTC().Format(time.RFC3339Nano)
	}
	scope := d.Scope
	if scope == "" {
		scope = "organization"
	}
	return map[string]any{
		"id": e.ID, "type": "environment", "name": d.Name, "description": d.Description,
		"config": s.envConfigJSON(d), "metadata": orEmptyMap(d.Metadata), "scope": scope,
		"created_at": e.CreatedAt.UTC().Format(time.RFC3339Nano), "updated_at": e.UpdatedAt.UTC().Format(time.RFC3339Nano),
		"archived_at": archived,
	}
}

// applyEnvFields writes the fields present in in onto d.
func (s *Service) applyEnvFields(in Obj, d *envDoc, create bool) error {
	if create || in.Has("name") {
		name, err := in.ReqStr("name")
		if err == nil {
			err = in.LimitLen("name", name, maxEnvName)
		}
		if err != nil {
			return err
		}
		d.Name = name
	}
	if in.Has("description") {
		d.Description = nil
		if in.Set("description") {
			v, err := in.Str("description")
			if err == nil {
				err = in.LimitLen("description", v, maxEnvDescription)
			}
			if err != nil {
				return err
			}
			d.Description = &v
		}
	}
	if in.Has("scope") {
		scope, err := in.Str("scope")
		if err != nil {
			return err
		}
		switch scope {
		case "", "organization":
		case "account":
			return in.NotYet("scope", "an environment is visible to every key of its tenant (scope organization)")
		default:
			return badRequest("field \"scope\" must be organization or account")
		}
		d.Scope = scope
	}
	if in.Has("metadata") {
		// For environments an empty string deletes a key too (SDK docs).
		md, err := in.MetadataPatch("metadata", d.Metadata, !create)
		if err != nil {
			return err
		}
		if err := s.checkSandboxMetadata(md); err != nil {
			return err
		}
		d.Metadata = md
	}
	// After metadata: the networking a config may state is the one the
	// environment's metadata gives its sandboxes.
	if in.Has("config") {
		if err := s.checkEnvConfig(in, d); err != nil {
			return err
		}
	}
	if len(d.Config) == 0 {
		d.Config = json.RawMessage(`{"type":"cloud"}`)
	}
	if session.ConfigType(d.Config) == "self_hosted" {
		return selfHostedMetadata(d.Metadata)
	}
	return nil
}

// checkSandboxMetadata validates the agentkernel.* keys with the parser
// the runtime uses, and their limits against the operator's policy, so a
// typo or an impossible limit fails here and not at the first tool call.
// An unknown agentkernel.* key is refused: stored, it would do nothing.
func (s *Service) checkSandboxMetadata(md map[string]string) error {
	es, err := session.ParseSandboxMetadata(md)
	var me *session.MetadataError
	if errors.As(err, &me) {
		return badRequest("field \"metadata.%s\" = %q: %s", me.Key, me.Value, me.Reason)
	}
	if err != nil {
		return err
	}
	if s.sandboxes != nil {
		var le *sandbox.LimitError
		if _, err := s.sandboxes.ResolveLimits(es.Limits); errors.As(err, &le) {
			return badRequest("field %q = %s: %s", "metadata."+session.MetaPrefix+le.Field, le.Value, le.Reason)
		} else if err != nil {
			return err
		}
		if es.Network == sandbox.NetworkEgress && s.sandboxNetwork != "" && s.sandboxNetwork != sandbox.NetworkEgress {
			return badRequest("field %q = %q: this daemon runs no egress proxy ([sandbox] network = %q)", "metadata."+session.MetaNetwork, es.Network, s.sandboxNetwork)
		}
		if es.Network == sandbox.NetworkHost && !s.sandboxes.HostNetworkAllowed() {
			return badRequest("field %q = %q: the host's network reaches everything the host does (the daemon's API on loopback included) and the operator does not allow it ([sandbox] allow_host_network)", "metadata."+session.MetaNetwork, es.Network)
		}
	}
	return nil
}

// Environment reads an environment the tenant owns; another tenant's
// answers exactly like a missing one.
func (s *Service) Environment(ctx context.Context, tenantID, id string) (*store.Environment, error) {
	e, err := s.st.GetEnvironment(ctx, id)
	if err == nil && e.TenantID != tenantID {
		err = store.ErrNotFound
	}
	if err != nil {
		return nil, notFoundAs("environment", id, err)
	}
	return e, nil
}

// CreateEnvironment creates an environment from a create body and starts
// its package build.
func (s *Service) CreateEnvironment(ctx context.Context, tenantID string, in Obj) (map[string]any, error) {
	d := envDoc{Metadata: map[string]string{}}
	if err := firstErr(s.applyEnvFields(in, &d, true), in.Strict()); err != nil {
		return nil, err
	}
	e, err := s.st.CreateEnvironment(ctx, &store.Environment{ID: ids.New("env"), TenantID: tenantID, Doc: MustJSON(d)})
	if err != nil {
		return nil, err
	}
	return s.envJSON(ctx, e, d, true)
}

// GetEnvironment renders an environment the tenant owns.
func (s *Service) GetEnvironment(ctx context.Context, tenantID, id string) (map[string]any, error) {
	e, err := s.Environment(ctx, tenantID, id)
	if err != nil {
		return nil, err
	}
	return s.EnvironmentJSON(ctx, e)
}

// UpdateEnvironment applies an update body and starts the package build
// of the new config.
func (s *Service) UpdateEnvironment(ctx context.Context, tenantID, id string, in Obj) (map[string]any, error) {
	cur, err := s.Environment(ctx, tenantID, id)
	if err != nil {
		return nil, err
	}
	if cur.ArchivedAt != nil {
		return nil, conflict("environment %q is archived; archived environments cannot be updated", id)
	}
	var d envDoc
	if err := json.Unmarshal(cur.Doc, &d); err != nil {
		return nil, err
	}
	if err := firstErr(s.applyEnvFields(in, &d, false), in.Strict()); err != nil {
		return nil, err
	}
	e, err := s.st.UpdateEnvironment(ctx, id, MustJSON(d))
	if err != nil {
		return nil, notFoundAs("environment", id, err)
	}
	return s.envJSON(ctx, e, d, true)
}

// ArchiveEnvironment archives an environment the tenant owns.
func (s *Service) ArchiveEnvironment(ctx context.Context, tenantID, id string) (map[string]any, error) {
	if _, err := s.Environment(ctx, tenantID, id); err != nil {
		return nil, err
	}
	e, err := s.st.ArchiveEnvironment(ctx, id, s.clock())
	if err != nil {
		return nil, notFoundAs("environment", id, err)
	}
	return s.EnvironmentJSON(ctx, e)
}

// DeleteEnvironment deletes an environment the tenant owns.
func (s *Service) DeleteEnvironment(ctx context.Context, tenantID, id string) error {
	if _, err := s.Environment(ctx, tenantID, id); err != nil {
		return err
	}
	return notFoundAs("environment", id, s.st.DeleteEnvironment(ctx, id))
}

// ListEnvironments lists the tenant's environments (p's paging and
// filters).
func (s *Service) ListEnvironments(ctx context.Context, tenantID string, p store.ListResourcesParams) ([]*store.Environment, error) {
	p.TenantID = tenantID
	return s.st.ListEnvironments(ctx, p)
}
