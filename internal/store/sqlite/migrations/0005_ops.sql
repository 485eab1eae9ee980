-- Crash-proof turns (seed 003): the op journal of side effects, the partial
-- model output of the step in flight, and background tasks that outlive a
-- restart. Times are unix microseconds and JSON is TEXT kept byte for byte,
-- as in 0001. session_id has no foreign key: the journal belongs to the
-- turn loop, which owns its sessions' lifetime and deletes their rows.

-- One row per side effect, keyed by the op id the caller derives from
-- (kind, canonical args, position): a replayed call finds its row.
CREATE TABLE ops (
    session_id   TEXT NOT NULL,
    id           TEXT NOT NULL,
    kind         TEXT NOT NULL,
    turn_seq     INTEGER NOT NULL,
    step         INTEGER NOT NULL,
    op_index     INTEGER NOT NULL,
    args         TEXT,
    status       TEXT NOT NULL CHECK (status IN ('started', 'completed')),
    result       TEXT,
    started_at   INTEGER NOT NULL,
    completed_at INTEGER,
    PRIMARY KEY (session_id, id)
);
CREATE INDEX ops_position ON ops (session_id, turn_seq, step, op_index, id);

-- Seq is dense per (session, turn, step), from 1; the writer assigns it.
CREATE TABLE stream_chunks (
    session_id TEXT NOT NULL,
    turn_seq   INTEGER NOT NULL,
    step       INTEGER NOT NULL,
    seq        INTEGER NOT NULL,
    data       TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, turn_seq, step, seq)
);

CREATE TABLE background_tasks (
    id         TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    sandbox_id TEXT NOT NULL DEFAULT '',
    process_id TEXT NOT NULL DEFAULT '',
    command    TEXT NOT NULL DEFAULT '',
    status     TEXT NOT NULL,
    exit_code  INTEGER,
    started_at INTEGER NOT NULL,
    deadline   INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX background_tasks_session ON background_tasks (session_id, started_at, id);
CREATE INDEX background_tasks_status ON background_tasks (status, started_at, id);
