-- Sandboxes and their workspace backups (seed 000: sandbox container state
-- machine). A sandbox's lifecycle state is never stored: the sandbox layer
-- derives it from the fact columns (handle, started_at, warmed_at,
-- stopping_at, destroyed_at). JSON columns use json (not jsonb) so opaque
-- driver handles and limits round-trip byte for byte.

CREATE TABLE sandboxes (
    id               text PRIMARY KEY,
    tenant_id        text NOT NULL DEFAULT '',
    driver           text NOT NULL DEFAULT '',
    image            text NOT NULL DEFAULT '',
    network          text NOT NULL DEFAULT '',
    limits           json,
    sleep_after_ms   bigint NOT NULL DEFAULT 0,
    metadata         json,
    environment      text NOT NULL DEFAULT '',
    session_key      text NOT NULL DEFAULT '',
    handle           json,
    started_at       timestamptz,
    warmed_at        timestamptz,
    stopping_at      timestamptz,
    destroyed_at     timestamptz,
    generation       bigint NOT NULL DEFAULT 0,
    -- Renewed by TouchSandbox, which never bumps version.
    last_activity_at timestamptz NOT NULL,
    version          bigint NOT NULL DEFAULT 1,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL
);
-- Listing all tenants pages on the primary key; a tenant's listing on this.
CREATE INDEX sandboxes_tenant_id_idx ON sandboxes (tenant_id, id);

-- No foreign key to sandboxes: backups outlive the sandbox that made them
-- until their TTL, so a recreated sandbox with the same (tenant,
-- environment, session_key) restores from them.
CREATE TABLE backups (
    id          text PRIMARY KEY,
    tenant_id   text NOT NULL DEFAULT '',
    environment text NOT NULL DEFAULT '',
    session_key text NOT NULL DEFAULT '',
    sandbox_id  text NOT NULL DEFAULT '',
    blob_key    text NOT NULL DEFAULT '',
    size        bigint NOT NULL DEFAULT 0,
    sha256      text NOT NULL DEFAULT '',
    stats       json,
    generation  bigint NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL
);
CREATE INDEX backups_key_created_idx ON backups (tenant_id, environment, session_key, created_at DESC, id DESC);
CREATE INDEX backups_sandbox_created_idx ON backups (sandbox_id, created_at DESC, id DESC);
CREATE INDEX backups_expires_idx ON backups (expires_at);
