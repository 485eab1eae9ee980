package config

import (
	"fmt"
	"path/filepath"
)

// EgressConfig tunes the egress proxy every sandbox's outbound traffic
// goes through ([sandbox] network = "egress").
type EgressConfig struct {
	// UpstreamCAFiles are PEM files of extra certificate authorities the
	// proxy trusts when it opens TLS to an upstream for credential
	// substitution (a private CA; tests' local servers). The system roots
	// are always trusted.
	UpstreamCAFiles []string `toml:"upstream_ca_files"`
}

// EgressCADir is where the proxy's CA certificate and key live.
func (c *Config) EgressCADir() string { return filepath.Join(c.Home, "egress") }

func (c *Config) validateEgress() []error {
	var errs []error
	for i, f := range c.Egress.UpstreamCAFiles {
		if !filepath.IsAbs(f) {
			errs = append(errs, &FieldError{Field: fmt.Sprintf("egress.upstream_ca_files[%d]", i), Value: f, Accepted: "an absolute path of a PEM file"})
		}
	}
	return errs
}
