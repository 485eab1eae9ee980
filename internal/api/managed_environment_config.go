package api

import (
	"encoding/json"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/session"
)

// An environment's config (the SDK's BetaCloudConfig) says what its
// sandboxes get. agentkernel answers with what is true, not with what was
// asked: networking follows the sandbox network the environment really
// gives (none unless metadata agentkernel.network or the daemon's [sandbox]
// network is "host"), and packages are always empty, since nothing installs
// them yet. A request may state the truth, and is refused with "not
// supported yet" where it asks for more.

var packageManagers = []string{"apt", "cargo", "gem", "go", "npm", "pip"}

// envNetwork is the network the environment's sandboxes get.
func (m *managed) envNetwork(d envDoc) string {
	if v := d.Metadata[session.MetaNetwork]; v != "" {
		return v
	}
	if m.sandboxNetwork != "" {
		return m.sandboxNetwork
	}
	return sandbox.NetworkNone
}

// envConfigJSON renders the config in the SDK's BetaCloudConfig shape.
func (m *managed) envConfigJSON(d envDoc) json.RawMessage {
	net := map[string]any{"type": "limited", "allowed_hosts": []string{}, "allow_mcp_servers": false, "allow_package_managers": false}
	if m.envNetwork(d) == sandbox.NetworkHost {
		net = map[string]any{"type": "unrestricted"}
	}
	pk := map[string]any{"type": "packages"}
	for _, mgr := range packageManagers {
		pk[mgr] = []string{}
	}
	return mustJSON(map[string]any{"type": "cloud", "networking": net, "packages": pk})
}

// checkEnvConfig accepts a config that states what the environment (with
// its metadata d) really provides and refuses the rest.
func (m *managed) checkEnvConfig(in obj, d envDoc) error {
	cfg, ok, err := in.object("config")
	if err != nil || !ok {
		return err
	}
	typ, err := cfg.str("type")
	if err != nil {
		return err
	}
	switch typ {
	case "", "cloud":
	case "self_hosted":
		return cfg.notYet("type", "self_hosted environments need the environment work queue, which agentkernel does not serve yet; sandboxes run on the daemon's host (type cloud)")
	default:
		return BadRequest("field %q: unknown environment type %q (want cloud)", cfg.field("type"), typ)
	}
	if net, ok, err := cfg.object("networking"); err != nil {
		return err
	} else if ok {
		if err := m.checkNetworking(net, d); err != nil {
			return err
		}
	}
	cfg.has("networking")
	if pk, ok, err := cfg.object("packages"); err != nil {
		return err
	} else if ok {
		if t, err := pk.str("type"); err != nil {
			return err
		} else if t != "" && t != "packages" {
			return BadRequest("field %q must be packages, got %q", pk.field("type"), t)
		}
		for _, mgr := range packageManagers {
			list, err := pk.strings(mgr)
			if err != nil {
				return err
			}
			if len(list) > 0 {
				return pk.notYet(mgr, "agentkernel installs no packages into sandboxes yet; install them with a command in the sandbox, or use an image that has them (metadata agentkernel.image)")
			}
		}
	}
	cfg.has("packages")
	return nil
}

func (m *managed) checkNetworking(n obj, d envDoc) error {
	typ, err := n.reqStr("type")
	if err != nil {
		return err
	}
	have := m.envNetwork(d)
	switch typ {
	case "unrestricted":
		if have != sandbox.NetworkHost {
			return n.notYet("type", fmt.Sprintf("unrestricted networking needs the egress proxy, which agentkernel does not have yet; this environment's sandboxes have no network, which {\"type\": \"limited\"} with no allowed_hosts states (metadata %s = host shares the host's network instead)", session.MetaNetwork))
		}
	case "limited":
		if have == sandbox.NetworkHost {
			return BadRequest("field %q: this environment's sandboxes share the host's network (metadata %s = host), which is unrestricted, not limited", n.field("type"), session.MetaNetwork)
		}
		hosts, err := n.strings("allowed_hosts")
		if err != nil {
			return err
		}
		if len(hosts) > 0 {
			return n.notYet("allowed_hosts", "reaching chosen hosts needs the egress proxy, which agentkernel does not have yet; sandboxes have no network")
		}
		for _, k := range []string{"allow_mcp_servers", "allow_package_managers"} {
			b, err := n.bool(k)
			if err != nil {
				return err
			}
			if b {
				return n.notYet(k, "sandboxes have no network yet; send false or leave it out")
			}
		}
	default:
		return BadRequest("field %q: unknown networking type %q (want unrestricted or limited)", n.field("type"), typ)
	}
	return nil
}
