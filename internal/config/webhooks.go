package config

import (
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/egress"
)

// WebhooksConfig is [webhooks]: delivery of events to the endpoints
// tenants register (issue 14). Zero durations and counts take the
// defaults.
type WebhooksConfig struct {
	// MaxAttempts: a delivery that failed this many times is dead (until
	// redelivered).
	MaxAttempts int64 `toml:"max_attempts"`
	// BackoffBase and BackoffMax bound the wait between attempts:
	// min(base·2^(n-1), max), jittered into its upper half.
	BackoffBase Duration `toml:"backoff_base"`
	BackoffMax  Duration `toml:"backoff_max"`
	// Timeout bounds one attempt.
	Timeout Duration `toml:"timeout"`
	// PollInterval is how often due retries are looked for.
	PollInterval Duration `toml:"poll_interval"`
	// Concurrency bounds attempts in flight.
	Concurrency int64 `toml:"concurrency"`
	// AllowedHosts may be reached even when they resolve to internal
	// addresses (the egress allowed_hosts syntax: host, *.domain,
	// host:port). Every other host must resolve to public addresses.
	AllowedHosts []string `toml:"allowed_hosts"`
	// AllowLoopback lets deliveries reach loopback addresses (off by
	// default).
	AllowLoopback bool `toml:"allow_loopback"`
	// Retention is how long a final delivery (delivered, or dead after
	// its last attempt) is kept; older ones are deleted (pending ones
	// always stay).
	Retention Duration `toml:"retention"`
}

// DefaultWebhooks returns the defaults.
func DefaultWebhooks() WebhooksConfig {
	return WebhooksConfig{
		MaxAttempts:  8,
		BackoffBase:  Duration(time.Second),
		BackoffMax:   Duration(time.Hour),
		Timeout:      Duration(10 * time.Second),
		PollInterval: Duration(time.Second),
		Concurrency:  16,
		Retention:    Duration(7 * 24 * time.Hour),
	}
}

// WebhookHosts parses allowed_hosts (Validate has checked them).
func (c *Config) WebhookHosts() []egress.HostPattern {
	hs, _ := egress.ParseHosts(c.Webhooks.AllowedHosts)
	return hs
}

func (c *Config) validateWebhooks() []error {
	var errs []error
	w := &c.Webhooks
	def := DefaultWebhooks()
	for _, d := range []struct {
		name     string
		v        *Duration
		def      Duration
		min, max time.Duration
	}{
		{"backoff_base", &w.BackoffBase, def.BackoffBase, time.Millisecond, 24 * time.Hour},
		{"backoff_max", &w.BackoffMax, def.BackoffMax, time.Millisecond, 7 * 24 * time.Hour},
		{"timeout", &w.Timeout, def.Timeout, 100 * time.Millisecond, 5 * time.Minute},
		{"poll_interval", &w.PollInterval, def.PollInterval, time.Millisecond, time.Hour},
		{"retention", &w.Retention, def.Retention, time.Minute, 10 * 365 * 24 * time.Hour},
	} {
		if *d.v == 0 {
			*d.v = d.def
		}
		if v := d.v.D(); v < d.min || v > d.max {
			errs = append(errs, &FieldError{Field: "webhooks." + d.name, Value: v.String(),
				Accepted: fmt.Sprintf("a duration from %v to %v", d.min, d.max), Reason: "out of range"})
		}
	}
	if w.BackoffMax.D() < w.BackoffBase.D() {
		errs = append(errs, &FieldError{Field: "webhooks.backoff_max", Value: w.BackoffMax.D().String(),
			Accepted: "at least webhooks.backoff_base (" + w.BackoffBase.D().String() + ")", Reason: "below the base"})
	}
	for _, n := range []struct {
		name     string
		v        *int64
		def, max int64
	}{
		{"max_attempts", &w.MaxAttempts, def.MaxAttempts, 100},
		{"concurrency", &w.Concurrency, def.Concurrency, 1024},
	} {
		if *n.v == 0 {
			*n.v = n.def
		}
		if *n.v < 1 || *n.v > n.max {
			errs = append(errs, &FieldError{Field: "webhooks." + n.name, Value: fmt.Sprint(*n.v),
				Accepted: fmt.Sprintf("1 to %d", n.max), Reason: "out of range"})
		}
	}
	for i, h := range w.AllowedHosts {
		if _, err := egress.ParseHost(h); err != nil {
			errs = append(errs, &FieldError{Field: fmt.Sprintf("webhooks.allowed_hosts[%d]", i), Value: h,
				Accepted: "a host, *.domain or host:port, e.g. hooks.internal.example.com:8443", Reason: err.Error()})
		}
	}
	return errs
}
