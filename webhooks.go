package agentkernel

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Webhook is a registered endpoint. Secret (the "whsec_…" signing key the
// official SDK's option.WithWebhookKey takes) is set only by Create.
type Webhook struct {
	ID          string    `json:"id"`
	Type        string    `json:"type"`
	URL         string    `json:"url"`
	EventTypes  []string  `json:"event_types"`
	Description string    `json:"description"`
	Secret      string    `json:"secret,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
}

// WebhookCreateParams registers an endpoint.
type WebhookCreateParams struct {
	URL         string   `json:"url"`
	EventTypes  []string `json:"event_types"`
	Description string   `json:"description,omitempty"`
}

// WebhookDelivery is one event for one endpoint: pending, delivered or
// dead (failed max_attempts times).
type WebhookDelivery struct {
	ID             string     `json:"id"`
	Type           string     `json:"type"`
	Seq            int64      `json:"seq"`
	WebhookID      string     `json:"webhook_id"`
	EventID        string     `json:"event_id"`
	EventType      string     `json:"event_type"`
	ResourceID     string     `json:"resource_id"`
	Status         string     `json:"status"`
	Attempts       int64      `json:"attempts"`
	NextAttemptAt  time.Time  `json:"next_attempt_at"`
	LastError      string     `json:"last_error"`
	LastStatusCode int64      `json:"last_status_code"`
	CreatedAt      time.Time  `json:"created_at"`
	DeliveredAt    *time.Time `json:"delivered_at"`
}

// WebhookDeliveriesParams pages an endpoint's deliveries by seq.
type WebhookDeliveriesParams struct {
	AfterSeq int64
	Limit    int
	Status   string // pending, delivered, dead; "" = any
}

// WebhooksService manages the caller tenant's webhook endpoints.
type WebhooksService struct{ c *Client }

// Create registers an endpoint; the answer holds its secret (only now).
func (s *WebhooksService) Create(ctx context.Context, p WebhookCreateParams) (*Webhook, error) {
	var w Webhook
	if err := s.c.do(ctx, http.MethodPost, "/v1/webhooks", p, &w); err != nil {
		return nil, err
	}
	return &w, nil
}

// List returns the tenant's endpoints.
func (s *WebhooksService) List(ctx context.Context) ([]Webhook, error) {
	var out struct {
		Data []Webhook `json:"data"`
	}
	if err := s.c.do(ctx, http.MethodGet, "/v1/webhooks", nil, &out); err != nil {
		return nil, err
	}
	return out.Data, nil
}

// Delete deletes an endpoint and its deliveries.
func (s *WebhooksService) Delete(ctx context.Context, id string) error {
	return s.c.do(ctx, http.MethodDelete, "/v1/webhooks/"+url.PathEscape(id), nil, nil)
}

// Deliveries lists an endpoint's deliveries, oldest first.
func (s *WebhooksService) Deliveries(ctx context.Context, id string, p WebhookDeliveriesParams) ([]WebhookDelivery, error) {
	q := url.Values{}
	if p.AfterSeq > 0 {
		q.Set("after_seq", strconv.FormatInt(p.AfterSeq, 10))
	}
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.Status != "" {
		q.Set("status", p.Status)
	}
	path := "/v1/webhooks/" + url.PathEscape(id) + "/deliveries"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out struct {
		Data []WebhookDelivery `json:"data"`
	}
	if err := s.c.do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return out.Data, nil
}

// Redeliver sends a delivery again (pending, attempts reset).
func (s *WebhooksService) Redeliver(ctx context.Context, id, deliveryID string) (*WebhookDelivery, error) {
	var d WebhookDelivery
	if err := s.c.do(ctx, http.MethodPost, "/v1/webhooks/"+url.PathEscape(id)+"/deliveries/"+url.PathEscape(deliveryID)+"/redeliver", nil, &d); err != nil {
		return nil, err
	}
	return &d, nil
}
