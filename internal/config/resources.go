package config

import (
	"fmt"

	"github.com/agentkernel/agentkernel/internal/egress"
)

// ResourcesConfig configures sessions' resources.
type ResourcesConfig struct {
	// GitInternalHosts are hosts on the daemon's own networks (loopback,
	// link-local, private ranges) that github_repository resources may be
	// cloned from, in the syntax of an environment's allowed_hosts
	// ("git.internal", "10.0.0.5:8443"). The daemon clones, so without
	// this a repository URL could reach whatever the daemon's host
	// reaches; by default only public addresses are cloned from.
	GitInternalHosts []string `toml:"git_internal_hosts"`
}

// GitInternalHostPatterns parses GitInternalHosts (Validate has checked
// them).
func (c *Config) GitInternalHostPatterns() []egress.HostPattern {
	ps, _ := egress.ParseHosts(c.Resources.GitInternalHosts)
	return ps
}

func (c *Config) validateResources() []error {
	var errs []error
	for i, h := range c.Resources.GitInternalHosts {
		if _, err := egress.ParseHost(h); err != nil {
			errs = append(errs, &FieldError{Field: fmt.Sprintf("resources.git_internal_hosts[%d]", i), Value: h,
				Accepted: "a host, *.domain, an IP or host:port", Reason: err.Error()})
		}
	}
	return errs
}
