package config

import (
	"fmt"
	"net/url"
	"os"
	"regexp"
	"time"
)

// ClusterConfig is [cluster]: several daemons sharing one PostgreSQL store
// and one S3-compatible blob store (issue 16, SPEC §9). Setting advertise
// makes this daemon a node of the cluster: durable objects are owned by
// one node at a time under a lease with a fencing token, a request that
// reaches another node is forwarded to the owner, and a node that dies
// loses its objects to the next node asked for them once its leases lapse.
type ClusterConfig struct {
	// Node is this daemon's node id (default: the host name). Every node
	// of a cluster needs its own; the sandboxes a node starts carry it.
	Node string `toml:"node"`
	// Advertise is the base URL other nodes reach this node's API at
	// (http://10.0.0.5:18888). Empty: a daemon alone.
	Advertise string `toml:"advertise"`
	// LeaseTTL is how long a node owns what it owns without renewing
	// (renewed every third of it): the longest a dead node's objects wait
	// for a survivor, and the time a partitioned node keeps acting.
	LeaseTTL Duration `toml:"lease_ttl"`
}

// DefaultCluster returns the defaults.
func DefaultCluster() ClusterConfig {
	return ClusterConfig{LeaseTTL: Duration(15 * time.Second)}
}

// Clustered says whether this daemon is a node of a cluster.
func (c ClusterConfig) Clustered() bool { return c.Advertise != "" }

var nodeRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

func (c *Config) validateCluster() []error {
	var errs []error
	add := func(e *FieldError) { errs = append(errs, e) }
	cl := &c.Cluster
	if cl.Node == "" {
		cl.Node, _ = os.Hostname()
		if cl.Node == "" {
			cl.Node = "node"
		}
	}
	if !nodeRE.MatchString(cl.Node) {
		add(&FieldError{Field: "cluster.node", Value: cl.Node, Accepted: "1-63 of A-Z, a-z, 0-9, '_', '.', '-', starting with a letter or digit", Reason: "not a node id"})
	}
	if cl.LeaseTTL == 0 {
		cl.LeaseTTL = DefaultCluster().LeaseTTL
	}
	const lo, hi = time.Second, 5 * time.Minute
	if v := cl.LeaseTTL.D(); v < lo || v > hi {
		add(&FieldError{Field: "cluster.lease_ttl", Value: v.String(), Accepted: fmt.Sprintf("a duration from %v to %v", lo, hi), Reason: "out of range"})
	}
	if cl.Advertise == "" {
		return errs
	}
	u, err := url.Parse(cl.Advertise)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		add(&FieldError{Field: "cluster.advertise", Value: cl.Advertise, Accepted: "an http(s) base URL with a host and no path, user, query or fragment", Reason: "not a base URL"})
	}
	// Several nodes share state only through the store and the blobs: a
	// node's own SQLite file or blob directory would split it.
	if c.Store.Engine != "postgres" {
		add(&FieldError{Field: "store.engine", Value: c.Store.Engine, Accepted: `"postgres" when cluster.advertise is set`, Reason: "the nodes of a cluster share one PostgreSQL store"})
	}
	if c.Blob.Engine != "s3" {
		add(&FieldError{Field: "blob.engine", Value: c.Blob.Engine, Accepted: `"s3" when cluster.advertise is set`, Reason: "the nodes of a cluster share one S3-compatible blob store"})
	}
	return errs
}
