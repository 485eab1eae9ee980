-- Issue 16: the work queue of self_hosted environments. A work item serves
-- one session until a worker stops it; at most one item per session is
-- live (not stopped), which the partial unique index enforces so that two
-- racing EnsureSessionWork calls create one item. lease_token is the value
-- the last heartbeat returned ('' before the first).
CREATE TABLE work_items (
    id                text PRIMARY KEY,
    tenant_id         text NOT NULL,
    environment_id    text NOT NULL,
    session_id        text NOT NULL,
    state             text NOT NULL,
    metadata          text NOT NULL DEFAULT '{}',
    created_at        timestamptz NOT NULL,
    polled_at         timestamptz,
    polled_by         text NOT NULL DEFAULT '',
    acked_at          timestamptz,
    started_at        timestamptz,
    heartbeat_at      timestamptz,
    lease_token       text NOT NULL DEFAULT '',
    lease_expires_at  timestamptz,
    stop_requested_at timestamptz,
    stopped_at        timestamptz
);
CREATE UNIQUE INDEX work_items_live_session ON work_items (session_id) WHERE state <> 'stopped';
-- The poll (and the stats): an environment's queued items, oldest first.
-- Partial, and with state in the key, so that the planners pick it over
-- work_items_list before any ANALYZE (both otherwise serve the order).
CREATE INDEX work_items_poll ON work_items (tenant_id, environment_id, state, created_at, id) WHERE state = 'queued';
-- The poll's reaping: only acked items have a lease, so a poll looks at
-- the leases that lapsed, not at every live one.
CREATE INDEX work_items_lease ON work_items (tenant_id, environment_id, lease_expires_at)
    WHERE lease_expires_at IS NOT NULL;
-- The listing: an environment's items, newest first.
CREATE INDEX work_items_list ON work_items (tenant_id, environment_id, created_at, id);

-- An environment key is scoped to one environment's queue ('' for a
-- tenant key).
ALTER TABLE api_keys ADD COLUMN environment_id text NOT NULL DEFAULT '';
