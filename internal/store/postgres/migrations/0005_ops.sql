-- Crash-proof turns (seed 003): the op journal of side effects, the partial
-- model output of the step in flight, and background tasks that outlive a
-- restart. JSON columns use json (not jsonb) so args and results round-trip
-- byte for byte. session_id has no foreign key: the journal belongs to the
-- turn loop, which owns its sessions' lifetime and deletes their rows.

-- One row per side effect, keyed by the op id the caller derives from
-- (kind, canonical args, position): a replayed call finds its row.
CREATE TABLE ops (
    session_id   text NOT NULL,
    id           text NOT NULL,
    kind         text NOT NULL,
    turn_seq     bigint NOT NULL,
    step         bigint NOT NULL,
    op_index     bigint NOT NULL,
    args         json,
    status       text NOT NULL CHECK (status IN ('started', 'completed')),
    result       json,
    started_at   timestamptz NOT NULL,
    completed_at timestamptz,
    PRIMARY KEY (session_id, id)
);
CREATE INDEX ops_position_idx ON ops (session_id, turn_seq, step, op_index, id);

-- Seq is dense per (session, turn, step), from 1. stream_heads holds the
-- last seq handed out: appenders serialise on its row (an upsert), so no
-- two take the same seq and none is skipped.
CREATE TABLE stream_heads (
    session_id text NOT NULL,
    turn_seq   bigint NOT NULL,
    step       bigint NOT NULL,
    last_seq   bigint NOT NULL,
    PRIMARY KEY (session_id, turn_seq, step)
);
CREATE TABLE stream_chunks (
    session_id text NOT NULL,
    turn_seq   bigint NOT NULL,
    step       bigint NOT NULL,
    seq        bigint NOT NULL,
    data       json NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (session_id, turn_seq, step, seq)
);

CREATE TABLE background_tasks (
    id         text PRIMARY KEY,
    session_id text NOT NULL,
    sandbox_id text NOT NULL DEFAULT '',
    process_id text NOT NULL DEFAULT '',
    command    text NOT NULL DEFAULT '',
    status     text NOT NULL,
    exit_code  bigint,
    started_at timestamptz NOT NULL,
    deadline   timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE INDEX background_tasks_session_idx ON background_tasks (session_id, started_at, id);
CREATE INDEX background_tasks_status_idx ON background_tasks (status, started_at, id);
