-- Webhooks (issue 14): tenants' endpoints, the event types each receives,
-- and the durable outbox. A delivery row is written in the transaction of
-- the event it announces; seq orders the outbox (per order key, the event
-- order) and a session's deliveries go out one at a time in seq order.
CREATE TABLE webhook_endpoints (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL,
    url         TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    event_types TEXT NOT NULL,
    secret      TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);
CREATE INDEX webhook_endpoints_tenant ON webhook_endpoints (tenant_id, id);

-- One row per (endpoint, event type): what an append looks up.
CREATE TABLE webhook_subscriptions (
    tenant_id   TEXT NOT NULL,
    event_type  TEXT NOT NULL,
    endpoint_id TEXT NOT NULL,
    PRIMARY KEY (tenant_id, event_type, endpoint_id)
);

CREATE TABLE webhook_deliveries (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT NOT NULL UNIQUE,
    endpoint_id     TEXT NOT NULL,
    tenant_id       TEXT NOT NULL,
    event_id        TEXT NOT NULL,
    event_type      TEXT NOT NULL,
    order_key       TEXT NOT NULL,
    payload         TEXT NOT NULL,
    status          TEXT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    last_error      TEXT NOT NULL DEFAULT '',
    last_status     INTEGER NOT NULL DEFAULT 0,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    delivered_at    INTEGER
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at, seq) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_order ON webhook_deliveries (endpoint_id, order_key, seq) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, seq);
