package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// FieldError names the configuration field that is wrong and what it
// accepts.
type FieldError struct {
	Field    string // e.g. "store.engine"
	Value    string
	Accepted string // e.g. `"sqlite" or "postgres"`
	Reason   string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "config: %s", e.Field)
	if e.Value != "" {
		fmt.Fprintf(&b, " = %q", e.Value)
	}
	if e.Reason != "" {
		fmt.Fprintf(&b, ": %s", e.Reason)
	}
	if e.Accepted != "" {
		fmt.Fprintf(&b, " (accepted: %s)", e.Accepted)
	}
	return b.String()
}

// Validate checks every field and returns all problems joined.
func (c *Config) Validate() error {
	var errs []error
	add := func(e *FieldError) { errs = append(errs, e) }

	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		add(&FieldError{Field: "listen", Value: c.Listen, Accepted: "host:port, e.g. 127.0.0.1:18888", Reason: "not a host:port address"})
	}
	if c.Home == "" {
		add(&FieldError{Field: "home", Reason: "must not be empty", Accepted: "a directory path"})
	}
	switch c.Store.Engine {
	case "sqlite":
	case "postgres":
		if c.Store.URL == "" {
			add(&FieldError{Field: "store.url", Reason: `required when store.engine = "postgres"`, Accepted: "postgres://user@host:5432/db"})
		}
	default:
		add(&FieldError{Field: "store.engine", Value: c.Store.Engine, Accepted: `"sqlite" or "postgres"`, Reason: "unknown engine"})
	}
	for field, v := range map[string]string{"packages.pip_index_url": c.Packages.PipIndexURL, "packages.npm_registry": c.Packages.NpmRegistry} {
		if v == "" {
			continue
		}
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			add(&FieldError{Field: field, Value: v, Accepted: "an http or https URL without credentials, e.g. https://pypi.example.com/simple", Reason: "not such a URL"})
		}
	}
	errs = append(errs, c.validateBlob()...)
	for _, f := range []struct {
		name string
		v    int64
	}{{"skills.max_upload_bytes", c.Skills.MaxUploadBytes}, {"skills.max_files", int64(c.Skills.MaxFiles)},
		{"skills.max_unpacked_bytes", c.Skills.MaxUnpackedBytes}, {"skills.max_expansion_ratio", c.Skills.MaxExpansionRatio}} {
		if f.v < 0 {
			add(&FieldError{Field: f.name, Value: strconv.FormatInt(f.v, 10), Accepted: "a positive number, or 0 for the default", Reason: "negative"})
		}
	}
	if c.Blob.GCGrace < 0 {
		add(&FieldError{Field: "blob.gc_grace", Value: c.Blob.GCGrace.D().String(), Accepted: "a non-negative duration (default 1h)", Reason: "negative"})
	}
	if c.Blob.GCInterval.D() < time.Second {
		add(&FieldError{Field: "blob.gc_interval", Value: c.Blob.GCInterval.D().String(), Accepted: "a duration of at least 1s (default 1h)", Reason: "too short"})
	}
	if c.Server.MaxBodyBytes < 1024 || c.Server.MaxBodyBytes > 1<<30 {
		add(&FieldError{Field: "server.max_body_bytes", Value: fmt.Sprint(c.Server.MaxBodyBytes), Accepted: "1024 to 1073741824", Reason: "out of range"})
	}
	if c.Server.ShutdownTimeout < 0 {
		add(&FieldError{Field: "server.shutdown_timeout", Value: c.Server.ShutdownTimeout.D().String(), Accepted: "a non-negative duration", Reason: "negative"})
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		add(&FieldError{Field: "log.level", Value: c.Log.Level, Accepted: `"debug", "info", "warn" or "error"`, Reason: "unknown level"})
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		add(&FieldError{Field: "log.format", Value: c.Log.Format, Accepted: `"text" or "json"`, Reason: "unknown format"})
	}
	sb := c.Sandbox
	switch sb.Driver {
	case "process", "docker":
	default:
		add(&FieldError{Field: "sandbox.driver", Value: sb.Driver, Accepted: `"process" or "docker"`, Reason: "unknown driver"})
	}
	switch sb.Network {
	case "none", "egress", "host":
	default:
		add(&FieldError{Field: "sandbox.network", Value: sb.Network, Accepted: `"egress", "none" or "host"`, Reason: "unknown network mode"})
	}
	if sb.SleepAfter.D() < time.Second {
		add(&FieldError{Field: "sandbox.sleep_after", Value: sb.SleepAfter.D().String(), Accepted: "a duration of at least 1s", Reason: "too short"})
	}
	if sb.BackgroundCap.D() <= 0 {
		add(&FieldError{Field: "sandbox.background_cap", Value: sb.BackgroundCap.D().String(), Accepted: "a positive duration", Reason: "out of range"})
	}
	if sb.BackupTTL.D() < time.Minute {
		add(&FieldError{Field: "sandbox.backup_ttl", Value: sb.BackupTTL.D().String(), Accepted: "a duration of at least 1m", Reason: "too short"})
	}
	if sb.ReapInterval.D() < 100*time.Millisecond {
		add(&FieldError{Field: "sandbox.reap_interval", Value: sb.ReapInterval.D().String(), Accepted: "a duration of at least 100ms", Reason: "too short"})
	}
	for _, le := range c.SandboxLimits().Check() {
		add(&FieldError{Field: "sandbox." + le.Field, Value: le.Value, Reason: le.Reason})
	}
	if sb.MaxFileBytes < 1 {
		add(&FieldError{Field: "sandbox.max_file_bytes", Value: fmt.Sprint(sb.MaxFileBytes), Accepted: "a positive number of bytes", Reason: "out of range"})
	}
	if sb.WarmPool < 0 || sb.WarmPool > 64 {
		add(&FieldError{Field: "sandbox.warm_pool", Value: fmt.Sprint(sb.WarmPool), Accepted: "0 (no pool) to 64 pooled sandboxes per shape", Reason: "out of range"})
	}
	if c.Files.MaxUploadBytes < 1 {
		add(&FieldError{Field: "files.max_upload_bytes", Value: fmt.Sprint(c.Files.MaxUploadBytes), Accepted: "a positive number of bytes", Reason: "out of range"})
	}
	errs = append(errs, c.validateObjects()...)
	errs = append(errs, c.validateModels()...)
	errs = append(errs, c.validatePrices()...)
	errs = append(errs, c.validateMonitor()...)
	errs = append(errs, c.validateEgress()...)
	errs = append(errs, c.validateWebhooks()...)
	errs = append(errs, c.validateWorkQueue()...)
	errs = append(errs, c.validateCluster()...)
	errs = append(errs, c.validateResources()...)
	return errors.Join(errs...)
}
