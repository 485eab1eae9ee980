package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/agentkernel/agentkernel/internal/egress"
	"github.com/agentkernel/agentkernel/internal/store"
)

// EnvCredentials gives the environment_variable credentials of a session's
// vaults, decrypted (*vault.Service).
type EnvCredentials interface {
	EnvCredentials(ctx context.Context, tenantID string, vaultIDs []string) ([]egress.Credential, error)
}

// PolicyStore is what the policy resolver reads.
type PolicyStore interface {
	GetSandbox(ctx context.Context, id string) (*store.Sandbox, error)
	GetManagedSession(ctx context.Context, id string) (*store.ManagedSession, error)
	GetEnvironment(ctx context.Context, id string) (*store.Environment, error)
}

// Policies resolves a sandbox's egress policy from durable facts, on every
// connection the proxy takes (egress.Resolver): the session that owns the
// sandbox, its environment's networking, its agent's MCP servers and its
// vaults' environment_variable credentials. Nothing a sandbox can write
// takes part: the sandbox is known by the listener its connection came
// through, and the session must name the sandbox as its own.
type Policies struct {
	Store  PolicyStore
	Vaults EnvCredentials // nil: no credentials are injected
	// Builds gives the policy of a sandbox of no session that an
	// environment's package build runs (*packages.Service); nil: none.
	Builds interface {
		Policy(ctx context.Context, sb *store.Sandbox) (*egress.Policy, error)
	}
}

// ErrNoPolicy: the sandbox belongs to no session, so nothing may leave it.
var ErrNoPolicy = egress.ErrNoPolicy

// Resolve implements egress.Resolver.
func (p *Policies) Resolve(ctx context.Context, sandboxID string) (*egress.Policy, error) {
	sb, err := p.Store.GetSandbox(ctx, sandboxID)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", sandboxID, err)
	}
	sessionID := sb.Metadata[sessionMeta]
	if sessionID == "" && p.Builds != nil {
		if pol, err := p.Builds.Policy(ctx, sb); !errors.Is(err, ErrNoPolicy) {
			return pol, err
		}
	}
	if sessionID == "" {
		return nil, fmt.Errorf("sandbox %s belongs to no Managed Agents session; only sessions' sandboxes reach out, through their environment's networking: %w", sandboxID, ErrNoPolicy)
	}
	s, err := p.Store.GetManagedSession(ctx, sessionID)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", sessionID, err)
	}
	if s.SandboxID != sandboxID || s.TenantID != sb.TenantID {
		return nil, fmt.Errorf("sandbox %s is not session %s's sandbox: %w", sandboxID, sessionID, ErrNoPolicy)
	}
	pol := &egress.Policy{TenantID: s.TenantID, SessionID: s.ID, SandboxID: sandboxID}
	net := ClosedNetworking()
	if s.EnvironmentID != "" {
		env, err := p.Store.GetEnvironment(ctx, s.EnvironmentID)
		if err != nil {
			return nil, fmt.Errorf("environment %s: %w", s.EnvironmentID, err)
		}
		var doc struct {
			Config json.RawMessage `json:"config"`
		}
		if err := json.Unmarshal(env.Doc, &doc); err != nil {
			return nil, fmt.Errorf("environment %s: %w", env.ID, err)
		}
		if net, err = ParseNetworking(doc.Config); err != nil {
			return nil, fmt.Errorf("environment %s: %w", env.ID, err)
		}
	}
	var doc sessionDocPolicy
	if err := json.Unmarshal(s.Doc, &doc); err != nil {
		return nil, fmt.Errorf("session %s: %w", s.ID, err)
	}
	if net.Type == NetworkingUnrestricted {
		pol.Unrestricted = true
		pol.Describe = fmt.Sprintf("environment %s networking unrestricted", s.EnvironmentID)
	} else {
		if pol.Allow, err = egress.ParseHosts(net.AllowedHosts); err != nil {
			return nil, fmt.Errorf("environment %s allowed_hosts: %w", s.EnvironmentID, err)
		}
		if net.AllowMCPServers {
			pol.Allow = append(pol.Allow, mcpHosts(doc.Agent.MCPServers)...)
		}
		if net.AllowPackageManagers {
			pol.Allow = append(pol.Allow, egress.PackageManagerHosts...)
		}
		pol.Describe = describeLimited(s.EnvironmentID, net)
	}
	if p.Vaults != nil && len(doc.VaultIDs) > 0 {
		if pol.Credentials, err = p.Vaults.EnvCredentials(ctx, s.TenantID, doc.VaultIDs); err != nil {
			return nil, fmt.Errorf("session %s vault credentials: %w", s.ID, err)
		}
	}
	return pol, nil
}

// sessionDocPolicy is the part of a session's stored doc the policy needs.
type sessionDocPolicy struct {
	VaultIDs []string `json:"vault_ids"`
	Agent    struct {
		MCPServers []struct {
			URL string `json:"url"`
		} `json:"mcp_servers"`
	} `json:"agent"`
}

// SessionVaultIDs reads a session's vault_ids from its stored doc.
func SessionVaultIDs(s *store.ManagedSession) []string {
	var doc sessionDocPolicy
	_ = json.Unmarshal(s.Doc, &doc)
	return doc.VaultIDs
}

// mcpHosts are the host:port of the agent's MCP server URLs.
func mcpHosts(servers []struct {
	URL string `json:"url"`
}) []egress.HostPattern {
	var out []egress.HostPattern
	for _, s := range servers {
		u, err := url.Parse(s.URL)
		if err != nil || u.Hostname() == "" {
			continue
		}
		port := u.Port()
		if port == "" {
			port = "443"
			if u.Scheme == "http" {
				port = "80"
			}
		}
		if hp, err := egress.ParseHost(net.JoinHostPort(u.Hostname(), port)); err == nil {
			out = append(out, hp)
		}
	}
	return out
}

func describeLimited(envID string, n *Networking) string {
	var parts []string
	if len(n.AllowedHosts) > 0 {
		parts = append(parts, "allowed_hosts: "+strings.Join(n.AllowedHosts, ", "))
	} else {
		parts = append(parts, "no allowed_hosts")
	}
	if n.AllowMCPServers {
		parts = append(parts, "the agent's MCP servers")
	}
	if n.AllowPackageManagers {
		parts = append(parts, "package registries")
	}
	return fmt.Sprintf("environment %s networking limited (%s)", envID, strings.Join(parts, "; "))
}
