package daemon

import (
	"log/slog"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/webhook"
)

// newWebhooks builds the webhook service from [webhooks].
func newWebhooks(cfg config.Config, st store.Store, log *slog.Logger) *webhook.Service {
	w := cfg.Webhooks
	return webhook.New(webhook.Config{
		Store:         st,
		Log:           log.With("component", "webhooks"),
		MaxAttempts:   int(w.MaxAttempts),
		BackoffBase:   w.BackoffBase.D(),
		BackoffMax:    w.BackoffMax.D(),
		Timeout:       w.Timeout.D(),
		PollInterval:  w.PollInterval.D(),
		Concurrency:   int(w.Concurrency),
		AllowedHosts:  cfg.WebhookHosts(),
		AllowLoopback: w.AllowLoopback,
		Retention:     w.Retention.D(),
	})
}
