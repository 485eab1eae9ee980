package daemon

import (
	"context"
	"log/slog"
	"os"

	"github.com/agentkernel/agentkernel/internal/cluster"
	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/store"
)

// nodeID names this daemon in run rows, termination records and, in a
// cluster, leases and sandboxes: [cluster] node, or the host name.
func nodeID(cfg config.Config) string {
	if cfg.Cluster.Node != "" {
		return cfg.Cluster.Node
	}
	host, _ := os.Hostname()
	if host == "" {
		host = "node"
	}
	return host
}

// joinCluster makes this daemon a node of the cluster ([cluster]
// advertise): it takes its node lease and renews its leases from now on.
// nil alone. lost is told of each lease another node takes over.
func joinCluster(ctx context.Context, cfg config.Config, st store.Store, lost func(string), log *slog.Logger) (*clusterService, error) {
	if !cfg.Cluster.Clustered() {
		return nil, nil
	}
	n := cluster.New(cluster.Config{Store: st, Node: nodeID(cfg), Address: cfg.Cluster.Advertise,
		TTL: cfg.Cluster.LeaseTTL.D(), Log: log.With("component", "cluster"), Lost: lost})
	if err := n.Start(ctx); err != nil {
		return nil, err
	}
	return &clusterService{n}, nil
}

// clusterService stops the node's lease renewal at shutdown (registered
// first, so stopped last: everything that acts on leases stops before).
type clusterService struct{ *cluster.Node }

func (c *clusterService) Start(context.Context) error { return nil }
