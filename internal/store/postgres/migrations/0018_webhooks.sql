-- Webhooks (issue 14): tenants' endpoints, the event types each receives,
-- and the durable outbox. A delivery row is written in the transaction of
-- the event it announces; seq orders the outbox (per order key, the event
-- order) and a session's deliveries go out one at a time in seq order.
CREATE TABLE webhook_endpoints (
    id          text PRIMARY KEY,
    tenant_id   text NOT NULL,
    url         text NOT NULL,
    description text NOT NULL DEFAULT '',
    event_types text NOT NULL,
    secret      text NOT NULL,
    created_at  timestamptz NOT NULL
);
CREATE INDEX webhook_endpoints_tenant ON webhook_endpoints (tenant_id, id);

-- One row per (endpoint, event type): what an append looks up.
CREATE TABLE webhook_subscriptions (
    tenant_id   text NOT NULL,
    event_type  text NOT NULL,
    endpoint_id text NOT NULL,
    PRIMARY KEY (tenant_id, event_type, endpoint_id)
);

CREATE TABLE webhook_deliveries (
    seq             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id              text NOT NULL UNIQUE,
    endpoint_id     text NOT NULL,
    tenant_id       text NOT NULL,
    event_id        text NOT NULL,
    event_type      text NOT NULL,
    order_key       text NOT NULL,
    payload         text NOT NULL,
    status          text NOT NULL,
    attempts        bigint NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL,
    last_error      text NOT NULL DEFAULT '',
    last_status     bigint NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    delivered_at    timestamptz
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at, seq) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_order ON webhook_deliveries (endpoint_id, order_key, seq) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, seq);
