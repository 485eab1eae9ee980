-- Managed Agents resources (agents, environments, sessions, session events)
-- and the run rows of the turn loop. Bodies are JSON documents in the SDK's
-- wire shape, kept as TEXT byte for byte; times are unix microseconds, as in
-- 0001. Session status is never stored: it is derived from terminated_at and
-- the run row (seed 000).

-- One row per agent version. Version rows are immutable except archived_at,
-- which marks every version of an archived agent. latest marks the newest
-- version so listings read one row per agent from the partial index.
CREATE TABLE agents (
    id          TEXT NOT NULL,
    version     INTEGER NOT NULL,
    tenant_id   TEXT NOT NULL DEFAULT '',
    doc         TEXT NOT NULL,
    latest      INTEGER NOT NULL,
    archived_at INTEGER,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (id, version)
);
CREATE UNIQUE INDEX agents_latest ON agents (tenant_id, id) WHERE latest = 1;

CREATE TABLE environments (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL DEFAULT '',
    doc         TEXT NOT NULL,
    archived_at INTEGER,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE INDEX environments_tenant ON environments (tenant_id, id);

-- No foreign keys to agents or environments: the API checks them when a
-- session is created, and deleting an environment must not delete history.
-- last_seq is the per-session event counter AppendEvents advances; it is
-- not part of the session's version, so appending never fails a CAS.
CREATE TABLE managed_sessions (
    id             TEXT PRIMARY KEY,
    tenant_id      TEXT NOT NULL DEFAULT '',
    agent_id       TEXT NOT NULL DEFAULT '',
    agent_version  INTEGER NOT NULL DEFAULT 0,
    environment_id TEXT NOT NULL DEFAULT '',
    doc            TEXT NOT NULL,
    sandbox_id     TEXT NOT NULL DEFAULT '',
    usage          TEXT,
    processed_seq  INTEGER NOT NULL DEFAULT 0,
    stop_reason    TEXT,
    terminated_at  INTEGER,
    archived_at    INTEGER,
    last_seq       INTEGER NOT NULL DEFAULT 0,
    version        INTEGER NOT NULL DEFAULT 1,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL
);
CREATE INDEX managed_sessions_tenant ON managed_sessions (tenant_id, id);
CREATE INDEX managed_sessions_agent ON managed_sessions (tenant_id, agent_id, id);

CREATE TABLE session_events (
    session_id TEXT NOT NULL REFERENCES managed_sessions (id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL,
    id         TEXT NOT NULL,
    type       TEXT NOT NULL,
    data       TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, seq),
    UNIQUE (session_id, id)
);

-- At most one run row per session: the primary key is the turn lock.
CREATE TABLE run_rows (
    session_id        TEXT PRIMARY KEY REFERENCES managed_sessions (id) ON DELETE CASCADE,
    turn_seq          INTEGER NOT NULL DEFAULT 0,
    owner             TEXT NOT NULL,
    lease_expires_at  INTEGER NOT NULL,
    recovering        INTEGER NOT NULL DEFAULT 0,
    recovery_attempts INTEGER NOT NULL DEFAULT 0,
    last_progress_seq INTEGER NOT NULL DEFAULT 0,
    started_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
);
