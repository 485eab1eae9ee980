-- Agent tasks and the sandbox monitor (seed 001): tickets (workflows), their
-- tasks, agent events with a per-sandbox activity summary, transcripts,
-- terminations, diagnostic safeguards and workflow results. JSON columns use
-- json (not jsonb) so commands, payloads and results round-trip byte for
-- byte.
-- Every safeguard's state is a row here, never a node's memory.

CREATE TABLE tickets (
    id          text PRIMARY KEY,
    tenant_id   text NOT NULL DEFAULT '',
    title       text NOT NULL DEFAULT '',
    description text NOT NULL DEFAULT '',
    metadata    json, -- JSON object of strings
    status      text NOT NULL,
    version     bigint NOT NULL DEFAULT 1,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);
CREATE INDEX tickets_tenant ON tickets (tenant_id, id);
CREATE INDEX tickets_status ON tickets (status, id);

-- ticket_id is '' for a task outside any workflow, so it has no foreign
-- key; the engine checks the ticket in the creating transaction.
CREATE TABLE agent_tasks (
    id              text PRIMARY KEY,
    tenant_id       text NOT NULL DEFAULT '',
    ticket_id       text NOT NULL DEFAULT '',
    kind            text NOT NULL,
    command         json NOT NULL, -- JSON array of strings
    env             json NOT NULL, -- JSON object
    sandbox_spec    json NOT NULL, -- JSON object
    sandbox_id      text NOT NULL DEFAULT '',
    process_id      text NOT NULL DEFAULT '',
    transcript_path text NOT NULL DEFAULT '',
    status          text NOT NULL,
    failure_reason  text NOT NULL DEFAULT '',
    result          json,
    diagnostic_of   text NOT NULL DEFAULT '',
    version         bigint NOT NULL DEFAULT 1,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    started_at      timestamptz,
    finished_at     timestamptz
);
CREATE INDEX agent_tasks_ticket ON agent_tasks (ticket_id, id);
CREATE INDEX agent_tasks_tenant ON agent_tasks (tenant_id, id);
CREATE INDEX agent_tasks_status ON agent_tasks (status, id);
CREATE INDEX agent_tasks_sandbox ON agent_tasks (sandbox_id, id);

-- No foreign key to sandboxes: the API checks the sandbox, and events and
-- their summary outlive it for the activity endpoint and diagnostics.
CREATE TABLE agent_events (
    sandbox_id       text NOT NULL,
    seq              bigint NOT NULL,
    type             text NOT NULL,
    heartbeat_status text NOT NULL DEFAULT '',
    payload          json,
    occurred_at      timestamptz NOT NULL,
    received_at      timestamptz NOT NULL,
    PRIMARY KEY (sandbox_id, seq)
);

-- The per-sandbox summary, rewritten by every append in the same
-- transaction (last_seq doubles as the dense Seq counter), so the monitor
-- reads one row per sandbox and never scans events.
CREATE TABLE agent_activity (
    sandbox_id            text PRIMARY KEY,
    first_event_at        timestamptz NOT NULL,
    last_event_at         timestamptz NOT NULL,
    last_received_at      timestamptz NOT NULL,
    last_seq              bigint NOT NULL,
    started_at            timestamptz,
    first_heartbeat_at    timestamptz,
    last_heartbeat_at     timestamptz,
    last_heartbeat_status text NOT NULL DEFAULT '',
    last_work_event_at    timestamptz,
    last_work_event_seq   bigint NOT NULL DEFAULT 0,
    last_work_event_type  text NOT NULL DEFAULT '',
    latest_completed_at   timestamptz,
    latest_completed_seq  bigint NOT NULL DEFAULT 0,
    event_count           bigint NOT NULL DEFAULT 0,
    heartbeat_count       bigint NOT NULL DEFAULT 0,
    work_event_count      bigint NOT NULL DEFAULT 0,
    completed_count       bigint NOT NULL DEFAULT 0,
    terminated_at         timestamptz,
    updated_at            timestamptz NOT NULL
);

CREATE TABLE transcripts (
    id         text PRIMARY KEY,
    task_id    text NOT NULL DEFAULT '',
    sandbox_id text NOT NULL DEFAULT '',
    source     text NOT NULL DEFAULT '',
    content    bytea,
    blob_key   text NOT NULL DEFAULT '',
    size       bigint NOT NULL DEFAULT 0,
    sha256     text NOT NULL DEFAULT '',
    saved_at   timestamptz NOT NULL
);
CREATE INDEX transcripts_task ON transcripts (task_id, saved_at);
CREATE INDEX transcripts_sandbox ON transcripts (sandbox_id, saved_at);

-- The primary key is the claim: one termination per sandbox, ever.
CREATE TABLE terminations (
    sandbox_id    text PRIMARY KEY,
    task_id       text NOT NULL DEFAULT '',
    tenant_id     text NOT NULL DEFAULT '',
    reason        text NOT NULL,
    duration_us   bigint NOT NULL DEFAULT 0,
    transcript_id text NOT NULL DEFAULT '',
    node          text NOT NULL DEFAULT '',
    stop_error    text NOT NULL DEFAULT '',
    at            timestamptz NOT NULL,
    finished_at   timestamptz
);

-- One row per ticket, created with it, so a diagnostic claim is a single
-- conditional UPDATE of an existing row.
CREATE TABLE diagnostic_states (
    ticket_id            text PRIMARY KEY REFERENCES tickets (id) ON DELETE CASCADE,
    attempts             bigint NOT NULL DEFAULT 0,
    consecutive_failures bigint NOT NULL DEFAULT 0,
    completed            bigint NOT NULL DEFAULT 0,
    last_spawned_at      timestamptz,
    pending_task_id      text NOT NULL DEFAULT '',
    human_review         boolean NOT NULL DEFAULT false,
    human_review_reason  text NOT NULL DEFAULT '',
    human_review_at      timestamptz,
    version              bigint NOT NULL DEFAULT 1,
    updated_at           timestamptz NOT NULL
);

CREATE TABLE workflow_results (
    ticket_id         text PRIMARY KEY REFERENCES tickets (id) ON DELETE CASCADE,
    task_id           text NOT NULL DEFAULT '',
    result            json,
    validation_status text NOT NULL,
    validation_note   text NOT NULL DEFAULT '',
    version           bigint NOT NULL DEFAULT 1,
    submitted_at      timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL
);
