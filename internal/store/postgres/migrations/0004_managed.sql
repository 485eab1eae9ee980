-- Managed Agents resources (agents, environments, sessions, session events)
-- and the run rows of the turn loop. Bodies are JSON documents in the SDK's
-- wire shape; json (not jsonb) keeps them byte for byte, as in 0002. Ids
-- are COLLATE "C" so listings page in byte order (ids are time-ordered
-- ASCII), whatever the database's locale, as the SQLite engine does. Session
-- status is never stored: it is derived from terminated_at and the run row
-- (seed 000).

-- One row per agent version. Version rows are immutable except archived_at,
-- which marks every version of an archived agent. latest marks the newest
-- version so listings read one row per agent from the partial index. Writers
-- of an agent serialise on its version-1 row (see UpdateAgent).
CREATE TABLE agents (
    id          text COLLATE "C" NOT NULL,
    version     bigint NOT NULL,
    tenant_id   text NOT NULL DEFAULT '',
    doc         json NOT NULL,
    latest      boolean NOT NULL,
    archived_at timestamptz,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (id, version)
);
CREATE UNIQUE INDEX agents_latest_idx ON agents (tenant_id, id) WHERE latest;

CREATE TABLE environments (
    id          text COLLATE "C" PRIMARY KEY,
    tenant_id   text NOT NULL DEFAULT '',
    doc         json NOT NULL,
    archived_at timestamptz,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);
CREATE INDEX environments_tenant_id_idx ON environments (tenant_id, id);

-- No foreign keys to agents or environments: the API checks them when a
-- session is created, and deleting an environment must not delete history.
-- last_seq is the per-session event counter AppendEvents advances under the
-- row lock; it is not part of the session's version, so appending never
-- fails a CAS.
CREATE TABLE managed_sessions (
    id             text COLLATE "C" PRIMARY KEY,
    tenant_id      text NOT NULL DEFAULT '',
    agent_id       text COLLATE "C" NOT NULL DEFAULT '',
    agent_version  bigint NOT NULL DEFAULT 0,
    environment_id text NOT NULL DEFAULT '',
    doc            json NOT NULL,
    sandbox_id     text NOT NULL DEFAULT '',
    usage          json,
    processed_seq  bigint NOT NULL DEFAULT 0,
    stop_reason    json,
    terminated_at  timestamptz,
    archived_at    timestamptz,
    last_seq       bigint NOT NULL DEFAULT 0,
    version        bigint NOT NULL DEFAULT 1,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL
);
CREATE INDEX managed_sessions_tenant_id_idx ON managed_sessions (tenant_id, id);
CREATE INDEX managed_sessions_agent_idx ON managed_sessions (tenant_id, agent_id, id);

CREATE TABLE session_events (
    session_id text COLLATE "C" NOT NULL REFERENCES managed_sessions (id) ON DELETE CASCADE,
    seq        bigint NOT NULL,
    id         text NOT NULL,
    type       text NOT NULL,
    data       json NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (session_id, seq),
    UNIQUE (session_id, id)
);

-- At most one run row per session: the primary key is the turn lock.
CREATE TABLE run_rows (
    session_id        text COLLATE "C" PRIMARY KEY REFERENCES managed_sessions (id) ON DELETE CASCADE,
    turn_seq          bigint NOT NULL DEFAULT 0,
    owner             text NOT NULL,
    lease_expires_at  timestamptz NOT NULL,
    recovering        boolean NOT NULL DEFAULT false,
    recovery_attempts bigint NOT NULL DEFAULT 0,
    last_progress_seq bigint NOT NULL DEFAULT 0,
    started_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL
);
