-- Sandboxes and their workspace backups. A sandbox's lifecycle state is
-- never stored: the sandbox layer derives it from the fact columns (handle,
-- started_at, warmed_at, stopping_at, destroyed_at). Times are unix
-- microseconds and JSON is TEXT kept byte for byte, as in 0001.

-- tenant_id has no foreign key: sandboxes carry tenant ids without a
-- tenant row (the store contract creates them so).
CREATE TABLE sandboxes (
    id               TEXT PRIMARY KEY,
    tenant_id        TEXT NOT NULL DEFAULT '',
    driver           TEXT NOT NULL DEFAULT '',
    image            TEXT NOT NULL DEFAULT '',
    network          TEXT NOT NULL DEFAULT '',
    limits           TEXT,
    sleep_after_ms   INTEGER NOT NULL DEFAULT 0,
    metadata         TEXT,
    environment      TEXT NOT NULL DEFAULT '',
    session_key      TEXT NOT NULL DEFAULT '',
    handle           TEXT,
    started_at       INTEGER,
    warmed_at        INTEGER,
    stopping_at      INTEGER,
    destroyed_at     INTEGER,
    generation       INTEGER NOT NULL DEFAULT 0,
    -- Renewed by TouchSandbox, which never bumps version.
    last_activity_at INTEGER NOT NULL,
    version          INTEGER NOT NULL DEFAULT 1,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
);
-- Listing every tenant pages on the primary key; one tenant's listing on this.
CREATE INDEX sandboxes_tenant ON sandboxes (tenant_id, id);

-- No foreign key to sandboxes: backups outlive the sandbox that made them
-- until their TTL, so a recreated sandbox with the same (tenant,
-- environment, session_key) restores from them.
CREATE TABLE backups (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL DEFAULT '',
    environment TEXT NOT NULL DEFAULT '',
    session_key TEXT NOT NULL DEFAULT '',
    sandbox_id  TEXT NOT NULL DEFAULT '',
    blob_key    TEXT NOT NULL DEFAULT '',
    size        INTEGER NOT NULL DEFAULT 0,
    sha256      TEXT NOT NULL DEFAULT '',
    stats       TEXT,
    generation  INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
);
CREATE INDEX backups_key_created ON backups (tenant_id, environment, session_key, created_at DESC, id DESC);
CREATE INDEX backups_sandbox_created ON backups (sandbox_id, created_at DESC, id DESC);
CREATE INDEX backups_expires ON backups (expires_at);
