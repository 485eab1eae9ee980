-- Issue 16: the work queue of self_hosted environments. A work item serves
-- one session until a worker stops it; at most one item per session is
-- live (not stopped), which the partial unique index enforces so that two
-- racing EnsureSessionWork calls create one item. lease_token is the value
-- the last heartbeat returned ('' before the first).
CREATE TABLE work_items (
    id                TEXT PRIMARY KEY,
    tenant_id         TEXT NOT NULL,
    environment_id    TEXT NOT NULL,
    session_id        TEXT NOT NULL,
    state             TEXT NOT NULL,
    metadata          TEXT NOT NULL DEFAULT '{}',
    created_at        INTEGER NOT NULL,
    polled_at         INTEGER,
    polled_by         TEXT NOT NULL DEFAULT '',
    acked_at          INTEGER,
    started_at        INTEGER,
    heartbeat_at      INTEGER,
    lease_token       TEXT NOT NULL DEFAULT '',
    lease_expires_at  INTEGER,
    stop_requested_at INTEGER,
    stopped_at        INTEGER
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
ALTER TABLE api_keys ADD COLUMN environment_id TEXT NOT NULL DEFAULT '';
