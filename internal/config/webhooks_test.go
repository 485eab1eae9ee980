package config

import (
	"strings"
	"testing"
	"time"
)

func TestWebhooksValidationNamesTheField(t *testing.T) {
	for _, c := range []struct {
		edit  func(w *WebhooksConfig)
		field string
	}{
		{func(w *WebhooksConfig) { w.MaxAttempts = -1 }, "webhooks.max_attempts"},
		{func(w *WebhooksConfig) { w.Concurrency = 5000 }, "webhooks.concurrency"},
		{func(w *WebhooksConfig) { w.Timeout = Duration(time.Hour) }, "webhooks.timeout"},
		{func(w *WebhooksConfig) { w.BackoffBase, w.BackoffMax = Duration(time.Minute), Duration(time.Second) }, "webhooks.backoff_max"},
		{func(w *WebhooksConfig) { w.AllowedHosts = []string{"ok.example.com", "https://x/y"} }, "webhooks.allowed_hosts[1]"},
		{func(w *WebhooksConfig) { w.Retention = Duration(time.Second) }, "webhooks.retention"},
	} {
		cfg := Default()
		cfg.Home = t.TempDir()
		c.edit(&cfg.Webhooks)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("Validate: %v, want an error naming %s", err, c.field)
		}
	}
	cfg := Default()
	cfg.Home = t.TempDir()
	cfg.Webhooks = WebhooksConfig{AllowLoopback: true}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Webhooks.MaxAttempts != 8 || cfg.Webhooks.BackoffBase.D() != time.Second || cfg.Webhooks.Retention.D() != 7*24*time.Hour {
		t.Fatalf("zero values did not take the defaults: %+v", cfg.Webhooks)
	}
}
