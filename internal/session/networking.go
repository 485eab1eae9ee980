package session

import (
	"encoding/json"
	"fmt"
)

// Networking types of an environment's config (the SDK's
// BetaCloudConfig networking union).
const (
	NetworkingUnrestricted = "unrestricted"
	NetworkingLimited      = "limited"
)

// Networking is an environment's config.networking as stored and returned:
// the SDK's BetaUnrestrictedNetwork or BetaLimitedNetwork, normalized
// (allowed_hosts canonical, every limited field present).
type Networking struct {
	Type                 string   `json:"type"`
	AllowedHosts         []string `json:"allowed_hosts,omitempty"`
	AllowMCPServers      bool     `json:"allow_mcp_servers"`
	AllowPackageManagers bool     `json:"allow_package_managers"`
}

// MarshalJSON writes the SDK's shape: unrestricted has only its type;
// limited has every field, allowed_hosts as [] when empty.
func (n Networking) MarshalJSON() ([]byte, error) {
	if n.Type == NetworkingUnrestricted {
		return json.Marshal(map[string]string{"type": n.Type})
	}
	hosts := n.AllowedHosts
	if hosts == nil {
		hosts = []string{}
	}
	return json.Marshal(map[string]any{"type": NetworkingLimited, "allowed_hosts": hosts,
		"allow_mcp_servers": n.AllowMCPServers, "allow_package_managers": n.AllowPackageManagers})
}

// ClosedNetworking is limited with nothing allowed: the default of an
// environment that states no networking.
func ClosedNetworking() *Networking { return &Networking{Type: NetworkingLimited} }

// ParseNetworking reads config.networking from an environment's stored
// config ({"type":"cloud","networking":…}); none stored is closed.
func ParseNetworking(config json.RawMessage) (*Networking, error) {
	var c struct {
		Networking *Networking `json:"networking"`
	}
	if len(config) > 0 {
		if err := json.Unmarshal(config, &c); err != nil {
			return nil, fmt.Errorf("environment config: %w", err)
		}
	}
	if c.Networking == nil || c.Networking.Type == "" {
		return ClosedNetworking(), nil
	}
	return c.Networking, nil
}
