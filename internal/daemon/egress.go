package daemon

import (
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/egress"
	"github.com/agentkernel/agentkernel/internal/packages"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/session"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/vault"
)

// newEgress builds the daemon's one egress proxy: its CA under the home
// (created once, key 0600), policies resolved per connection from the
// store and the vaults, decisions to the audit log. nil when the
// operator's [sandbox] network leaves sandboxes no way out through it.
func newEgress(cfg config.Config, st store.Store, vaults *vault.Service, builds *packages.Service, reg prometheus.Registerer, log *slog.Logger) (*egress.Proxy, *egressAudit, error) {
	if cfg.Sandbox.Network != "" && cfg.Sandbox.Network != sandbox.NetworkEgress {
		return nil, nil, nil
	}
	ca, err := egress.LoadOrCreateCA(cfg.EgressCADir())
	if err != nil {
		return nil, nil, fmt.Errorf("egress CA: %w", err)
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	for i, f := range cfg.Egress.UpstreamCAFiles {
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, fmt.Errorf("egress.upstream_ca_files[%d]: %w", i, err)
		}
		if !roots.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("egress.upstream_ca_files[%d] = %q: no PEM certificate in it", i, f)
		}
	}
	audit := newEgressAudit(st, reg, log.With("component", "egress-audit"))
	pol := &session.Policies{Store: st, Builds: builds}
	if vaults != nil {
		pol.Vaults = vaults
	}
	p, err := egress.New(egress.Config{CA: ca, Resolver: pol, Auditor: audit, Registry: reg,
		UpstreamRoots: roots, Log: log.With("component", "egress")})
	if err != nil {
		return nil, nil, err
	}
	return p, audit, nil
}
