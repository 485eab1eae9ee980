// Package webhook delivers the events agentkernel produces to the
// endpoints tenants register (issue 14). The store writes one outbox row
// per event and subscribed endpoint in the transaction of the event; this
// package registers endpoints, and its delivery loop sends the outbox
// rows — signed with the Standard Webhooks scheme the official SDK's
// Beta.Webhooks.Unwrap verifies — at least once, in order per session,
// retrying with exponential backoff and jitter until max_attempts, after
// which a delivery is dead until redelivered.
package webhook

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentkernel/agentkernel/internal/clock"
	"github.com/agentkernel/agentkernel/internal/egress"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Config tunes the service; zero values take the defaults.
type Config struct {
	Store store.WebhookStore
	Log   *slog.Logger
	Clock clock.Clock
	// MaxAttempts: a delivery that failed this many times is dead.
	MaxAttempts int
	// BackoffBase and BackoffMax bound the wait before attempt n+1:
	// min(BackoffBase·2^(n-1), BackoffMax), jittered into its upper half.
	BackoffBase, BackoffMax time.Duration
	// Timeout bounds one attempt (connect, send, response headers).
	Timeout time.Duration
	// PollInterval is how often due retries are looked for (new events
	// wake the loop at once).
	PollInterval time.Duration
	// Concurrency bounds attempts in flight.
	Concurrency int
	// AllowedHosts may be reached even when they resolve to internal
	// addresses (private ranges, link-local); every other host must
	// resolve to public addresses only (the sandbox egress rule).
	AllowedHosts []egress.HostPattern
	// AllowLoopback lets deliveries reach loopback addresses (tests, a
	// receiver on the daemon's host).
	AllowLoopback bool
	// Resolve resolves host names (default: the system resolver).
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// Jitter returns a number in [0, 1) (default: crypto random).
	Jitter func() float64
	// Retention: final deliveries (delivered, or dead) whose last attempt
	// is older are deleted, a sweep every PruneInterval (and at Start).
	Retention, PruneInterval time.Duration
	// Attempted, when set, receives each delivery as an attempt left it
	// (a test signal; sent without blocking the loop for long).
	Attempted chan<- *store.WebhookDelivery
}

// Defaults.
const (
	DefaultMaxAttempts  = 8
	DefaultBackoffBase  = time.Second
	DefaultBackoffMax   = time.Hour
	DefaultTimeout      = 10 * time.Second
	DefaultPollInterval = time.Second
	DefaultConcurrency  = 16
	DefaultRetention    = 7 * 24 * time.Hour
	// DefaultPruneInterval: deliveries outlive their retention by at most
	// this much.
	DefaultPruneInterval = time.Hour
	// MaxEndpoints bounds a tenant's endpoints.
	MaxEndpoints = 20
	// maxURLLen and maxDescription bound registration fields.
	maxURLLen      = 2048
	maxDescription = 512
)

// Service registers endpoints and runs the delivery loop.
type Service struct {
	cfg    Config
	st     store.WebhookStore
	log    *slog.Logger
	client *http.Client
	guard  *guard

	wake chan struct{}
	mu   sync.Mutex
	stop context.CancelFunc
	done chan struct{}
}

// New returns a service; Start runs its delivery loop.
func New(cfg Config) *Service {
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = DefaultBackoffBase
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = DefaultBackoffMax
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.PruneInterval <= 0 {
		cfg.PruneInterval = DefaultPruneInterval
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Jitter == nil {
		cfg.Jitter = cryptoFloat
	}
	s := &Service{cfg: cfg, st: cfg.Store, log: cfg.Log, wake: make(chan struct{}, 1)}
	s.guard = &guard{allowed: cfg.AllowedHosts, loopback: cfg.AllowLoopback, resolve: cfg.Resolve}
	s.client = newClient(s.guard, cfg.Timeout)
	return s
}

// InputError is a request the service refuses: Status is the HTTP status
// (400 or 404), Msg the message the client sees.
type InputError struct {
	Status int
	Msg    string
}

func (e *InputError) Error() string { return e.Msg }

func badRequest(format string, args ...any) error {
	return &InputError{Status: http.StatusBadRequest, Msg: fmt.Sprintf(format, args...)}
}

func notFound(kind, id string) error {
	return &InputError{Status: http.StatusNotFound, Msg: fmt.Sprintf("%s %q not found", kind, id)}
}

// CreateParams is a registration.
type CreateParams struct {
	URL         string
	EventTypes  []string
	Description string
}

// sdkEventTypes is the SDK's webhook event list (betawebhook.go): the types
// a registration may name. Those agentkernel does not write to the outbox
// yet are refused as not supported yet rather than accepted and ignored.
var sdkEventTypes = []string{
	"session.created", "session.pending", "session.running", "session.idled", "session.requires_action",
	"session.archived", "session.deleted", "session.status_rescheduled", "session.status_run_started",
	"session.status_idled", "session.status_terminated", "session.thread_created", "session.thread_idled",
	"session.thread_terminated", "session.outcome_evaluation_ended", "vault.created", "vault.archived",
	"vault.deleted", "vault_credential.created", "vault_credential.archived", "vault_credential.deleted",
	"vault_credential.refresh_failed", "session.updated", "agent.created", "agent.archived", "agent.deleted",
	"deployment.paused", "deployment_run.failed", "deployment.created", "deployment.updated",
	"deployment.unpaused", "agent.updated", "deployment.archived", "deployment_run.started",
	"deployment.deleted", "deployment_run.succeeded", "environment.created", "environment.updated",
	"environment.archived", "environment.deleted", "memory_store.created", "memory_store.archived",
	"memory_store.deleted", "session.budget_reached", "user_profile.enforcement_action_opened",
	"user_profile.enforcement_action_resolved",
}

// Create validates and stores an endpoint with a new signing secret (the
// only time the secret is returned).
func (s *Service) Create(ctx context.Context, tenant string, p CreateParams) (*store.WebhookEndpoint, error) {
	if err := s.checkURL(p.URL); err != nil {
		return nil, err
	}
	if len(p.EventTypes) == 0 {
		return nil, badRequest("field \"event_types\": at least one event type is required (supported: %s)",
			strings.Join(store.WebhookEventTypes, ", "))
	}
	var unsupported []string
	for i, t := range p.EventTypes {
		switch {
		case slices.Contains(store.WebhookEventTypes, t):
		case slices.Contains(sdkEventTypes, t):
			unsupported = append(unsupported, t)
		default:
			return nil, badRequest("field \"event_types[%d]\": %q is not a webhook event type (supported: %s)",
				i, t, strings.Join(store.WebhookEventTypes, ", "))
		}
		if slices.Index(p.EventTypes, t) != i {
			return nil, badRequest("field \"event_types[%d]\": %q is listed twice", i, t)
		}
	}
	if len(unsupported) > 0 {
		return nil, badRequest("field \"event_types\": %s not supported yet (supported: %s)",
			strings.Join(unsupported, ", "), strings.Join(store.WebhookEventTypes, ", "))
	}
	if len(p.Description) > maxDescription {
		return nil, badRequest("field \"description\": %d bytes is over the limit of %d", len(p.Description), maxDescription)
	}
	have, err := s.st.ListWebhookEndpoints(ctx, tenant)
	if err != nil {
		return nil, err
	}
	if len(have) >= MaxEndpoints {
		return nil, badRequest("a tenant may register at most %d webhook endpoints; delete one first", MaxEndpoints)
	}
	return s.st.CreateWebhookEndpoint(ctx, &store.WebhookEndpoint{TenantID: tenant, URL: p.URL,
		Description: p.Description, EventTypes: p.EventTypes, Secret: newSecret()})
}

// checkURL refuses what no delivery could reach: a URL that is not
// http(s), carries credentials, or names an address the egress rule
// forbids. Names are checked again, resolved, at every delivery.
func (s *Service) checkURL(raw string) error {
	const field = "field \"url\""
	if raw == "" {
		return badRequest("%s is required", field)
	}
	if len(raw) > maxURLLen {
		return badRequest("%s: %d bytes is over the limit of %d", field, len(raw), maxURLLen)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Opaque != "" {
		return badRequest("%s: %q is not an http or https URL (example: https://hooks.example.com/agentkernel)", field, raw)
	}
	if u.User != nil {
		return badRequest("%s must not carry credentials", field)
	}
	if u.Fragment != "" {
		return badRequest("%s must not have a fragment", field)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return badRequest("%s: port %q is not 1-65535", field, port)
	}
	if err := s.guard.checkHost(u.Hostname(), n); err != nil {
		return badRequest("%s: %v", field, err)
	}
	return nil
}

// Get reads an endpoint the tenant owns (another tenant's is not found).
func (s *Service) Get(ctx context.Context, tenant, id string) (*store.WebhookEndpoint, error) {
	e, err := s.st.GetWebhookEndpoint(ctx, id)
	if errors.Is(err, store.ErrNotFound) || err == nil && e.TenantID != tenant {
		return nil, notFound("webhook", id)
	}
	return e, err
}

// List lists the tenant's endpoints.
func (s *Service) List(ctx context.Context, tenant string) ([]*store.WebhookEndpoint, error) {
	return s.st.ListWebhookEndpoints(ctx, tenant)
}

// Delete deletes the endpoint and its deliveries.
func (s *Service) Delete(ctx context.Context, tenant, id string) error {
	if _, err := s.Get(ctx, tenant, id); err != nil {
		return err
	}
	err := s.st.DeleteWebhookEndpoint(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return notFound("webhook", id)
	}
	return err
}

// Deliveries lists an endpoint's deliveries after seq afterSeq.
func (s *Service) Deliveries(ctx context.Context, tenant, id string, afterSeq int64, limit int, status string) ([]*store.WebhookDelivery, error) {
	if _, err := s.Get(ctx, tenant, id); err != nil {
		return nil, err
	}
	switch status {
	case "", store.DeliveryPending, store.DeliveryDelivered, store.DeliveryDead:
	default:
		return nil, badRequest("query parameter \"status\": %q is not pending, delivered or dead", status)
	}
	return s.st.ListWebhookDeliveries(ctx, store.ListWebhookDeliveriesParams{EndpointID: id, AfterSeq: afterSeq,
		Limit: limit, Status: status})
}

// Redeliver makes a delivery pending and due now, whatever its state.
func (s *Service) Redeliver(ctx context.Context, tenant, endpointID, deliveryID string) (*store.WebhookDelivery, error) {
	if _, err := s.Get(ctx, tenant, endpointID); err != nil {
		return nil, err
	}
	d, err := s.st.GetWebhookDelivery(ctx, deliveryID)
	if errors.Is(err, store.ErrNotFound) || err == nil && d.EndpointID != endpointID {
		return nil, notFound("webhook delivery", deliveryID)
	}
	if err != nil {
		return nil, err
	}
	d, err = s.st.RedeliverWebhookDelivery(ctx, deliveryID, s.cfg.Clock.Now())
	if err == nil {
		s.Notify()
	}
	return d, err
}

// newSecret is a Standard Webhooks signing key: "whsec_" + base64 of 32
// random bytes.
func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

func cryptoFloat() float64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	u := uint64(0)
	for _, x := range b {
		u = u<<8 | uint64(x)
	}
	return float64(u>>11) / (1 << 53)
}
