-- Times are INTEGER unix microseconds (the precision Postgres keeps, so both
-- engines round-trip the same values). JSON is TEXT validated by the engine.

CREATE TABLE tenants (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL
);

CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    prefix       TEXT NOT NULL,
    hash         TEXT NOT NULL UNIQUE,
    admin        INTEGER NOT NULL DEFAULT 0,
    created_at   INTEGER NOT NULL,
    revoked_at   INTEGER,
    last_used_at INTEGER
);
CREATE INDEX api_keys_tenant ON api_keys (tenant_id, created_at);

-- tenant_id has no foreign key: the runtime may create internal sessions
-- outside any tenant ('' is a valid owner).
CREATE TABLE sessions (
    id                TEXT PRIMARY KEY,
    tenant_id         TEXT NOT NULL DEFAULT '',
    agent_type        TEXT NOT NULL DEFAULT '',
    status            TEXT NOT NULL,
    step_count        INTEGER NOT NULL DEFAULT 0,
    resume_count      INTEGER NOT NULL DEFAULT 0,
    version           INTEGER NOT NULL,
    custom_state      TEXT NOT NULL DEFAULT '{}',
    runtime           TEXT NOT NULL DEFAULT '{}',
    error             TEXT NOT NULL DEFAULT '',
    failure_reason    TEXT NOT NULL DEFAULT '',
    interrupt_context TEXT,
    checkpoint_id     TEXT NOT NULL DEFAULT '',
    checkpointed_at   INTEGER,
    checkpoint_source TEXT NOT NULL DEFAULT '',
    parent_session_id TEXT NOT NULL DEFAULT '',
    root_session_id   TEXT NOT NULL DEFAULT '',
    metadata          TEXT,
    tags              TEXT,
    interrupt_set     INTEGER NOT NULL DEFAULT 0,
    interrupt_reason  TEXT NOT NULL DEFAULT '',
    interrupt_at      INTEGER,
    expires_at        INTEGER,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
);
CREATE INDEX sessions_tenant_created ON sessions (tenant_id, created_at DESC, id DESC);
CREATE INDEX sessions_expires ON sessions (expires_at) WHERE expires_at IS NOT NULL;

CREATE TABLE messages (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL,
    role       TEXT NOT NULL,
    content    TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;

CREATE TABLE runs (
    id             TEXT PRIMARY KEY,
    session_id     TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq            INTEGER NOT NULL,
    status         TEXT NOT NULL,
    start_sequence INTEGER NOT NULL DEFAULT 0,
    error          TEXT NOT NULL DEFAULT '',
    metadata       TEXT,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    completed_at   INTEGER,
    UNIQUE (session_id, seq)
);

-- ord keeps creation order independent of ids and step counts (step counts
-- restart every turn, seed 004).
CREATE TABLE checkpoints (
    ord           INTEGER PRIMARY KEY AUTOINCREMENT,
    id            TEXT NOT NULL UNIQUE,
    session_id    TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    step_count    INTEGER NOT NULL,
    message_count INTEGER NOT NULL,
    version       INTEGER NOT NULL,
    run_id        TEXT NOT NULL DEFAULT '',
    source        TEXT NOT NULL,
    state         TEXT NOT NULL,
    metadata      TEXT,
    created_at    INTEGER NOT NULL
);
CREATE INDEX checkpoints_session ON checkpoints (session_id, ord);

CREATE TABLE staging (
    ord          INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id   TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    step_id      TEXT NOT NULL,
    messages     TEXT NOT NULL,
    state_writes TEXT,
    created_at   INTEGER NOT NULL,
    UNIQUE (session_id, step_id)
);
CREATE INDEX staging_created ON staging (created_at);

CREATE TABLE sub_session_refs (
    ord                 INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id          TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    sub_session_id      TEXT NOT NULL,
    agent_type          TEXT NOT NULL DEFAULT '',
    parent_tool_call_id TEXT NOT NULL DEFAULT '',
    status              TEXT NOT NULL DEFAULT '',
    result              TEXT,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    UNIQUE (session_id, sub_session_id)
);
