package managed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/egress"
	"github.com/agentkernel/agentkernel/internal/packages"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/session"
	"github.com/agentkernel/agentkernel/internal/store"
)

// An environment's config (the SDK's BetaCloudConfig) says what its
// sandboxes get, and agentkernel answers with what is true. Networking is
// enforced by the egress proxy: limited (allowed_hosts, the agent's MCP
// servers, the package registries) or unrestricted. Two things bound it:
// the operator's [sandbox] network (none: nothing leaves any sandbox) and
// the environment's metadata agentkernel.network (none: no proxy; host: the
// host's own network, which is unrestricted and not the proxy's to limit).
// Packages (pip and npm; the other managers are refused "not supported
// yet") are built once per environment version into a layer every sandbox
// of the environment starts from (internal/packages); the build's state is
// shown beside the config as packages_build.

// maxEnvAllowedHosts bounds config.networking.allowed_hosts.
const maxEnvAllowedHosts = 256

// envNetwork is the network mode the environment's sandboxes get.
func (s *Service) envNetwork(d envDoc) string {
	if v := d.Metadata[session.MetaNetwork]; v != "" {
		return v
	}
	if s.sandboxNetwork != "" {
		return s.sandboxNetwork
	}
	return sandbox.NetworkEgress
}

// envConfigJSON renders the config in the SDK's BetaCloudConfig shape
// (BetaSelfHostedConfig for a self_hosted one).
func (s *Service) envConfigJSON(d envDoc) json.RawMessage {
	if session.ConfigType(d.Config) == "self_hosted" {
		return json.RawMessage(`{"type":"self_hosted"}`)
	}
	var net any = session.ClosedNetworking()
	switch s.envNetwork(d) {
	case sandbox.NetworkHost:
		net = map[string]any{"type": session.NetworkingUnrestricted}
	case sandbox.NetworkEgress:
		if n, err := session.ParseNetworking(d.Config); err == nil {
			net = n
		}
	}
	spec, _ := packages.FromConfig(d.Config)
	pk := map[string]any{"type": "packages"}
	for _, mgr := range packages.Managers {
		pk[mgr] = orEmpty(*spec.List(mgr))
	}
	return MustJSON(map[string]any{"type": "cloud", "networking": net, "packages": pk})
}

// checkEnvConfig reads a config sent on create or update into d.Config.
// Networking left out keeps what is stored (the SDK: "omit on update to
// preserve").
func (s *Service) checkEnvConfig(in Obj, d *envDoc) error {
	cfg, ok, err := in.Object("config")
	if err != nil || !ok {
		return err
	}
	typ, err := cfg.Str("type")
	if err != nil {
		return err
	}
	if typ == "" {
		typ = "cloud"
	}
	if typ != "cloud" && typ != "self_hosted" {
		return badRequest("field %q: unknown environment type %q (want cloud or self_hosted)", cfg.Field("type"), typ)
	}
	if len(d.Config) > 0 && session.ConfigType(d.Config) != typ {
		return badRequest("field %q: an environment's type is fixed when it is created (it is %s; create another environment for %s)",
			cfg.Field("type"), session.ConfigType(d.Config), typ)
	}
	if typ == "self_hosted" && s.work == nil {
		return cfg.NotYet("type", "this daemon serves no environment work queue for self_hosted workers to poll")
	}
	if typ == "self_hosted" {
		// Its sandboxes are the workers' own: the daemon makes none, so
		// nothing of a cloud config applies.
		for _, k := range cfg.Keys() {
			if k != "type" {
				return badRequest("field %q: a self_hosted environment's config takes only type: its workers run the tools on their own hosts", cfg.Field(k))
			}
		}
		d.Config = json.RawMessage(`{"type":"self_hosted"}`)
		return nil
	}
	stored := map[string]json.RawMessage{}
	if len(d.Config) > 0 {
		if err := json.Unmarshal(d.Config, &stored); err != nil {
			return err
		}
	}
	stored["type"] = json.RawMessage(`"cloud"`)
	if net, ok, err := cfg.Object("networking"); err != nil {
		return err
	} else if ok {
		n, err := s.checkNetworking(net, *d)
		if err != nil {
			return err
		}
		stored["networking"] = MustJSON(n)
	}
	cfg.Has("networking")
	if pk, ok, err := cfg.Object("packages"); err != nil {
		return err
	} else if ok {
		spec, err := s.checkPackages(pk)
		if err != nil {
			return err
		}
		stored["packages"] = MustJSON(spec)
	}
	cfg.Has("packages")
	d.Config = MustJSON(stored)
	return nil
}

// checkPackages reads config.packages: every list replaces the stored
// one (the SDK sends them all).
func (s *Service) checkPackages(pk Obj) (packages.Spec, error) {
	var spec packages.Spec
	if t, err := pk.Str("type"); err != nil {
		return spec, err
	} else if t != "" && t != "packages" {
		return spec, badRequest("field %q must be packages, got %q", pk.Field("type"), t)
	}
	total := 0
	for _, mgr := range packages.Managers {
		list, err := pk.Strings(mgr)
		if err != nil {
			return spec, err
		}
		if len(list) == 0 {
			continue
		}
		if !packages.Supported[mgr] {
			return spec, pk.NotYet(mgr, "agentkernel builds pip and npm packages into an environment's layer; install "+mgr+" packages with a command in the sandbox, or use an image that has them (metadata agentkernel.image)")
		}
		if s.packages == nil {
			return spec, pk.NotYet(mgr, "this daemon runs no sandbox layer to build packages in")
		}
		if s.sandboxNetwork != "" && s.sandboxNetwork != sandbox.NetworkEgress {
			// A build runs the packages' own install scripts: only behind
			// the egress proxy, which lets it reach the registries alone.
			return spec, pk.NotYet(mgr, fmt.Sprintf("packages are built behind the egress proxy, and this daemon's [sandbox] network is %q (egress is needed)", s.sandboxNetwork))
		}
		for i, name := range list {
			if err := packages.CheckName(name); err != nil {
				return spec, badRequest("field \"%s[%d]\" %v", pk.Field(mgr), i, err)
			}
		}
		total += len(list)
		*spec.List(mgr) = list
	}
	if total > packages.MaxPackages {
		return spec, badRequest("field %q lists %d packages; the limit is %d for all managers together", pk.Path(), total, packages.MaxPackages)
	}
	return spec, nil
}

// envBuild is the environment's package build as shown beside its config
// (packages_build: status building, ready or failed, progress, and for a
// failed build the package and the end of its log), or nil without
// packages. start begins the build when there is none (create, update).
func (s *Service) envBuild(ctx context.Context, e *store.Environment, d envDoc, start bool) (any, error) {
	spec, err := packages.FromConfig(d.Config)
	if err != nil || spec.Empty() || s.packages == nil {
		return nil, err
	}
	es, err := session.ParseSandboxMetadata(d.Metadata)
	if err != nil {
		return nil, err
	}
	t, err := s.packages.Target(ctx, spec, es.Driver, es.Image)
	if err != nil {
		return nil, err
	}
	var b *store.PackageBuild
	if start && e.ArchivedAt == nil {
		b, err = s.packages.Ensure(ctx, e.TenantID, e.ID, t)
	} else {
		b, err = s.packages.Status(ctx, e.TenantID, t)
	}
	if err != nil || b == nil {
		return nil, err
	}
	out := map[string]any{"status": b.Status, "progress": b.Progress, "updated_at": b.UpdatedAt.UTC().Format(time.RFC3339Nano)}
	if b.Status == store.BuildFailed {
		mgr, pkg, _ := strings.Cut(b.Package, ":")
		out["failed_package"] = map[string]string{"manager": mgr, "name": pkg}
		out["log_tail"] = b.LogTail
	}
	return out, nil
}

// checkNetworking reads config.networking against what the environment's
// sandboxes can have, and returns it normalized for storage.
func (s *Service) checkNetworking(n Obj, d envDoc) (*session.Networking, error) {
	typ, err := n.Str("type")
	if err != nil {
		return nil, err
	}
	have := s.envNetwork(d)
	closed := func(k string) error {
		if d.Metadata[session.MetaNetwork] == sandbox.NetworkNone {
			return badRequest("field %q: this environment's sandboxes have no network at all (metadata %s = none); remove that key to let the egress proxy apply this policy", n.Field(k), session.MetaNetwork)
		}
		return badRequest("field %q: the operator allows no outbound traffic from any sandbox ([sandbox] network = \"none\"); only {\"type\": \"limited\"} with no hosts is possible here", n.Field(k))
	}
	switch typ {
	case session.NetworkingUnrestricted:
		if have == sandbox.NetworkNone {
			return nil, closed("type")
		}
		return &session.Networking{Type: typ}, nil
	case "", session.NetworkingLimited:
		if have == sandbox.NetworkHost {
			return nil, badRequest("field %q: this environment's sandboxes share the host's network (metadata %s = host), which is unrestricted, not limited", n.Field("type"), session.MetaNetwork)
		}
		hosts, err := n.Strings("allowed_hosts")
		if err != nil {
			return nil, err
		}
		if len(hosts) > maxEnvAllowedHosts {
			return nil, badRequest("field %q has %d entries; the limit is %d", n.Field("allowed_hosts"), len(hosts), maxEnvAllowedHosts)
		}
		parsed, err := egress.ParseHosts(hosts)
		var he *egress.IndexedHostError
		if errors.As(err, &he) {
			return nil, badRequest("field \"%s[%d]\": %v", n.Field("allowed_hosts"), he.Index, he.Err)
		} else if err != nil {
			return nil, err
		}
		out := &session.Networking{Type: session.NetworkingLimited, AllowedHosts: make([]string, 0, len(parsed))}
		for _, hp := range parsed {
			out.AllowedHosts = append(out.AllowedHosts, hp.String())
		}
		if out.AllowMCPServers, err = n.Bool("allow_mcp_servers"); err != nil {
			return nil, err
		}
		if out.AllowPackageManagers, err = n.Bool("allow_package_managers"); err != nil {
			return nil, err
		}
		if have == sandbox.NetworkNone {
			switch {
			case len(out.AllowedHosts) > 0:
				return nil, closed("allowed_hosts")
			case out.AllowMCPServers:
				return nil, closed("allow_mcp_servers")
			case out.AllowPackageManagers:
				return nil, closed("allow_package_managers")
			}
		}
		return out, nil
	default:
		return nil, badRequest("field %q: unknown networking type %q (want %s or %s)", n.Field("type"), typ, session.NetworkingUnrestricted, session.NetworkingLimited)
	}
}

// orEmpty renders a nil list as [] (the SDK's lists are required).
func orEmpty(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// selfHostedMetadata refuses the agentkernel.* sandbox settings on a
// self_hosted environment: the daemon makes no sandbox for it, so they
// would be stored and ignored.
func selfHostedMetadata(md map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(md)) {
		if strings.HasPrefix(k, session.MetaPrefix) {
			return badRequest("field \"metadata\": key %q sets up the daemon's sandboxes, and a self_hosted environment has none (its workers run the tools)", k)
		}
	}
	return nil
}
