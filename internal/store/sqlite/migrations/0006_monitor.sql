-- Agent tasks and the sandbox monitor (seed 001): tickets (workflows), their
-- tasks, agent events with a per-sandbox activity summary, transcripts,
-- terminations, diagnostic safeguards and workflow results. Times are unix
-- microseconds as in 0001; JSON is TEXT so it round-trips byte for byte.
-- Every safeguard's state is a row here, never a node's memory.

CREATE TABLE tickets (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL DEFAULT '',
    title       TEXT NOT NULL DEFAULT '',
    description TEXT NOT NULL DEFAULT '',
    metadata    TEXT, -- JSON object of strings
    status      TEXT NOT NULL,
    version     INTEGER NOT NULL DEFAULT 1,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE INDEX tickets_tenant ON tickets (tenant_id, id);
CREATE INDEX tickets_status ON tickets (status, id);

-- ticket_id is '' for a task outside any workflow, so it has no foreign
-- key; the engine checks the ticket in the creating transaction.
CREATE TABLE agent_tasks (
    id              TEXT PRIMARY KEY,
    tenant_id       TEXT NOT NULL DEFAULT '',
    ticket_id       TEXT NOT NULL DEFAULT '',
    kind            TEXT NOT NULL,
    command         TEXT NOT NULL, -- JSON array of strings
    env             TEXT NOT NULL, -- JSON object
    sandbox_spec    TEXT NOT NULL, -- JSON object
    sandbox_id      TEXT NOT NULL DEFAULT '',
    process_id      TEXT NOT NULL DEFAULT '',
    transcript_path TEXT NOT NULL DEFAULT '',
    status          TEXT NOT NULL,
    failure_reason  TEXT NOT NULL DEFAULT '',
    result          TEXT,
    diagnostic_of   TEXT NOT NULL DEFAULT '',
    version         INTEGER NOT NULL DEFAULT 1,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    started_at      INTEGER,
    finished_at     INTEGER
);
CREATE INDEX agent_tasks_ticket ON agent_tasks (ticket_id, id);
CREATE INDEX agent_tasks_tenant ON agent_tasks (tenant_id, id);
CREATE INDEX agent_tasks_status ON agent_tasks (status, id);
CREATE INDEX agent_tasks_sandbox ON agent_tasks (sandbox_id, id);

-- No foreign key to sandboxes: the API checks the sandbox, and events and
-- their summary outlive it for the activity endpoint and diagnostics.
CREATE TABLE agent_events (
    sandbox_id       TEXT NOT NULL,
    seq              INTEGER NOT NULL,
    type             TEXT NOT NULL,
    heartbeat_status TEXT NOT NULL DEFAULT '',
    payload          TEXT,
    occurred_at      INTEGER NOT NULL,
    received_at      INTEGER NOT NULL,
    PRIMARY KEY (sandbox_id, seq)
) WITHOUT ROWID;

-- The per-sandbox summary, rewritten by every append in the same
-- transaction (last_seq doubles as the dense Seq counter), so the monitor
-- reads one row per sandbox and never scans events.
CREATE TABLE agent_activity (
    sandbox_id            TEXT PRIMARY KEY,
    first_event_at        INTEGER NOT NULL,
    last_event_at         INTEGER NOT NULL,
    last_received_at      INTEGER NOT NULL,
    last_seq              INTEGER NOT NULL,
    started_at            INTEGER,
    first_heartbeat_at    INTEGER,
    last_heartbeat_at     INTEGER,
    last_heartbeat_status TEXT NOT NULL DEFAULT '',
    last_work_event_at    INTEGER,
    last_work_event_seq   INTEGER NOT NULL DEFAULT 0,
    last_work_event_type  TEXT NOT NULL DEFAULT '',
    latest_completed_at   INTEGER,
    latest_completed_seq  INTEGER NOT NULL DEFAULT 0,
    event_count           INTEGER NOT NULL DEFAULT 0,
    heartbeat_count       INTEGER NOT NULL DEFAULT 0,
    work_event_count      INTEGER NOT NULL DEFAULT 0,
    completed_count       INTEGER NOT NULL DEFAULT 0,
    terminated_at         INTEGER,
    updated_at            INTEGER NOT NULL
);

CREATE TABLE transcripts (
    id         TEXT PRIMARY KEY,
    task_id    TEXT NOT NULL DEFAULT '',
    sandbox_id TEXT NOT NULL DEFAULT '',
    source     TEXT NOT NULL DEFAULT '',
    content    BLOB,
    blob_key   TEXT NOT NULL DEFAULT '',
    size       INTEGER NOT NULL DEFAULT 0,
    sha256     TEXT NOT NULL DEFAULT '',
    saved_at   INTEGER NOT NULL
);
CREATE INDEX transcripts_task ON transcripts (task_id, saved_at);
CREATE INDEX transcripts_sandbox ON transcripts (sandbox_id, saved_at);

-- The primary key is the claim: one termination per sandbox, ever.
CREATE TABLE terminations (
    sandbox_id    TEXT PRIMARY KEY,
    task_id       TEXT NOT NULL DEFAULT '',
    tenant_id     TEXT NOT NULL DEFAULT '',
    reason        TEXT NOT NULL,
    duration_us   INTEGER NOT NULL DEFAULT 0,
    transcript_id TEXT NOT NULL DEFAULT '',
    node          TEXT NOT NULL DEFAULT '',
    stop_error    TEXT NOT NULL DEFAULT '',
    at            INTEGER NOT NULL,
    finished_at   INTEGER
);

-- One row per ticket, created with it, so a diagnostic claim is a single
-- conditional UPDATE of an existing row.
CREATE TABLE diagnostic_states (
    ticket_id            TEXT PRIMARY KEY REFERENCES tickets (id) ON DELETE CASCADE,
    attempts             INTEGER NOT NULL DEFAULT 0,
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    completed            INTEGER NOT NULL DEFAULT 0,
    last_spawned_at      INTEGER,
    pending_task_id      TEXT NOT NULL DEFAULT '',
    human_review         INTEGER NOT NULL DEFAULT 0,
    human_review_reason  TEXT NOT NULL DEFAULT '',
    human_review_at      INTEGER,
    version              INTEGER NOT NULL DEFAULT 1,
    updated_at           INTEGER NOT NULL
);

CREATE TABLE workflow_results (
    ticket_id         TEXT PRIMARY KEY REFERENCES tickets (id) ON DELETE CASCADE,
    task_id           TEXT NOT NULL DEFAULT '',
    result            TEXT,
    validation_status TEXT NOT NULL,
    validation_note   TEXT NOT NULL DEFAULT '',
    version           INTEGER NOT NULL DEFAULT 1,
    submitted_at      INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
);
