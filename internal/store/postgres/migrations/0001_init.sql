-- Initial schema: tenants, API keys and the seed-004 session store.
-- JSON columns use json (not jsonb) so opaque values round-trip byte for
-- byte; merges happen in Go under the session row lock.

CREATE TABLE tenants (
    id         text PRIMARY KEY,
    name       text NOT NULL UNIQUE,
    created_at timestamptz NOT NULL
);

CREATE TABLE api_keys (
    id           text PRIMARY KEY,
    tenant_id    text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name         text NOT NULL DEFAULT '',
    prefix       text NOT NULL DEFAULT '',
    hash         text NOT NULL UNIQUE,
    admin        boolean NOT NULL DEFAULT false,
    created_at   timestamptz NOT NULL,
    revoked_at   timestamptz,
    last_used_at timestamptz
);
CREATE INDEX api_keys_tenant_idx ON api_keys (tenant_id, created_at);

CREATE TABLE sessions (
    id                text PRIMARY KEY,
    tenant_id         text NOT NULL DEFAULT '',
    agent_type        text NOT NULL DEFAULT '',
    status            text NOT NULL,
    step_count        bigint NOT NULL DEFAULT 0,
    resume_count      bigint NOT NULL DEFAULT 0,
    version           bigint NOT NULL DEFAULT 1,
    custom_state      json NOT NULL,
    runtime           json NOT NULL,
    error             text NOT NULL DEFAULT '',
    failure_reason    text NOT NULL DEFAULT '',
    interrupt_context json,
    checkpoint_id     text NOT NULL DEFAULT '',
    checkpointed_at   timestamptz,
    checkpoint_source text NOT NULL DEFAULT '',
    parent_session_id text NOT NULL DEFAULT '',
    root_session_id   text NOT NULL DEFAULT '',
    metadata          json,
    tags              json,
    expires_at        timestamptz,
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL,
    -- Counters kept on the row so appends and run creation serialise on the
    -- row lock and hand out dense sequence numbers.
    message_count     bigint NOT NULL DEFAULT 0,
    run_count         bigint NOT NULL DEFAULT 0,
    -- The interrupt flag is a side channel: it never bumps version.
    interrupt_set     boolean NOT NULL DEFAULT false,
    interrupt_reason  text NOT NULL DEFAULT '',
    interrupt_set_at  timestamptz
);
CREATE INDEX sessions_tenant_created_idx ON sessions (tenant_id, created_at DESC, id DESC);
CREATE INDEX sessions_expires_idx ON sessions (expires_at) WHERE expires_at IS NOT NULL;

CREATE TABLE messages (
    session_id text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq        bigint NOT NULL,
    role       text NOT NULL,
    content    json NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (session_id, seq)
);

CREATE TABLE runs (
    id             text PRIMARY KEY,
    session_id     text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq            bigint NOT NULL,
    status         text NOT NULL,
    start_sequence bigint NOT NULL DEFAULT 0,
    error          text NOT NULL DEFAULT '',
    metadata       json,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL,
    completed_at   timestamptz,
    UNIQUE (session_id, seq)
);

CREATE TABLE checkpoints (
    -- ord gives creation order independent of clock resolution.
    ord           bigint GENERATED ALWAYS AS IDENTITY,
    id            text NOT NULL,
    session_id    text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    step_count    bigint NOT NULL,
    message_count bigint NOT NULL,
    version       bigint NOT NULL,
    run_id        text NOT NULL DEFAULT '',
    source        text NOT NULL,
    state         json NOT NULL,
    metadata      json,
    created_at    timestamptz NOT NULL,
    PRIMARY KEY (session_id, id)
);
CREATE INDEX checkpoints_session_ord_idx ON checkpoints (session_id, ord);

-- No foreign key: CleanupOrphanedStaging exists to sweep rows whose session
-- is gone, and DeleteSession removes a session's rows explicitly.
CREATE TABLE staged_changes (
    ord          bigint GENERATED ALWAYS AS IDENTITY,
    session_id   text NOT NULL,
    step_id      text NOT NULL,
    messages     json NOT NULL,
    state_writes json,
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (session_id, step_id)
);
CREATE INDEX staged_changes_session_ord_idx ON staged_changes (session_id, ord);
CREATE INDEX staged_changes_created_idx ON staged_changes (created_at);

CREATE TABLE sub_session_refs (
    ord                 bigint GENERATED ALWAYS AS IDENTITY,
    session_id          text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    sub_session_id      text NOT NULL,
    agent_type          text NOT NULL DEFAULT '',
    parent_tool_call_id text NOT NULL DEFAULT '',
    status              text NOT NULL DEFAULT '',
    result              json,
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL,
    PRIMARY KEY (session_id, sub_session_id)
);
CREATE INDEX sub_session_refs_session_ord_idx ON sub_session_refs (session_id, ord);
