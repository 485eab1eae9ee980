package session

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
)

// MetaPrefix starts the environment metadata keys that carry agentkernel's
// own sandbox settings for the environment's sessions.
const MetaPrefix = "agentkernel."

// Environment metadata keys that override the [sandbox] defaults.
const (
	MetaDriver     = MetaPrefix + "driver"
	MetaImage      = MetaPrefix + "image"
	MetaSleepAfter = MetaPrefix + "sleep_after"
	MetaNetwork    = MetaPrefix + "network"
	MetaMemoryMB   = MetaPrefix + sandbox.LimitMemoryMB
	MetaPids       = MetaPrefix + sandbox.LimitPids
	MetaCPUs       = MetaPrefix + sandbox.LimitCPUs
)

// metaKeys are every agentkernel.* key an environment may carry.
var metaKeys = []string{MetaDriver, MetaImage, MetaSleepAfter, MetaNetwork, MetaMemoryMB, MetaPids, MetaCPUs}

// EnvSandbox is the sandbox configuration an environment asks for; empty
// fields keep the sandbox layer's defaults. The SDK's networking config is
// not mapped: only agentkernel.network widens the sandbox's network, so an
// environment never gets the host network by default.
type EnvSandbox struct {
	Driver     string
	Image      string
	Network    string
	SleepAfter time.Duration
	// Limits are checked against the operator's policy by the sandbox
	// layer (sandbox.Manager.ResolveLimits), at environment create/update
	// and again when the session's sandbox is created.
	Limits sandbox.LimitsRequest
}

// MetadataError is an agentkernel.* metadata key that is unknown or whose
// value does not parse.
type MetadataError struct {
	Key    string
	Value  string
	Reason string
}

func (e *MetadataError) Error() string {
	return fmt.Sprintf("metadata %s = %q: %s", e.Key, e.Value, e.Reason)
}

// ParseSandboxMetadata reads the agentkernel.* keys of an environment's
// metadata, the one parser for the API (which refuses a bad environment
// with a 400) and the runtime (which creates the session's sandbox). A key
// agentkernel does not know is an error: stored, it would be accepted and
// ignored.
func ParseSandboxMetadata(md map[string]string) (EnvSandbox, error) {
	var es EnvSandbox
	for _, k := range slices.Sorted(maps.Keys(md)) { // the first bad key, the same every time
		if !strings.HasPrefix(k, MetaPrefix) {
			continue
		}
		v := md[k]
		bad := func(reason string) error { return &MetadataError{Key: k, Value: v, Reason: reason} }
		switch k {
		case MetaDriver, MetaImage:
			if strings.TrimSpace(v) == "" {
				return es, bad("must not be empty")
			}
			if k == MetaDriver {
				es.Driver = v
			} else {
				es.Image = v
			}
		case MetaNetwork:
			if v != sandbox.NetworkNone && v != sandbox.NetworkEgress && v != sandbox.NetworkHost {
				return es, bad(fmt.Sprintf("not a network mode (accepted: %q, %q or %q)", sandbox.NetworkNone, sandbox.NetworkEgress, sandbox.NetworkHost))
			}
			es.Network = v
		case MetaSleepAfter:
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return es, bad("not a duration (examples: 30s, 5m)")
			}
			es.SleepAfter = d
		case MetaMemoryMB, MetaPids:
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return es, bad("not a whole number in the range of a 64-bit integer")
			}
			if k == MetaMemoryMB {
				es.Limits.MemoryMB = &n
			} else {
				es.Limits.Pids = &n
			}
		case MetaCPUs:
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return es, bad("not a number of CPUs such as 0.5 or 2")
			}
			es.Limits.CPUs = &f // NaN and Inf parse; the policy refuses them
		default:
			return es, bad("not a setting agentkernel knows (known: " + strings.Join(metaKeys, ", ") + "); remove it")
		}
	}
	return es, nil
}

// parseEnvironment reads a stored environment's sandbox settings.
func parseEnvironment(e *store.Environment) (EnvSandbox, error) {
	var doc struct {
		Metadata map[string]string `json:"metadata"`
	}
	if len(e.Doc) > 0 {
		if err := json.Unmarshal(e.Doc, &doc); err != nil {
			return EnvSandbox{}, fmt.Errorf("environment %s: %w", e.ID, err)
		}
	}
	es, err := ParseSandboxMetadata(doc.Metadata)
	if err != nil {
		return es, fmt.Errorf("environment %s: %w", e.ID, err)
	}
	return es, nil
}

// ConfigType is an environment config's type: "cloud" (the default) or
// "self_hosted".
func ConfigType(config json.RawMessage) string {
	var c struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(config, &c) != nil || c.Type == "" {
		return "cloud"
	}
	return c.Type
}

// SelfHosted says whether env is a self_hosted environment: its sessions'
// sandbox tools run on the workers that poll its work queue, not here.
func SelfHosted(env *store.Environment) bool {
	if env == nil {
		return false
	}
	var d struct {
		Config json.RawMessage `json:"config"`
	}
	if json.Unmarshal(env.Doc, &d) != nil {
		return false
	}
	return ConfigType(d.Config) == "self_hosted"
}
