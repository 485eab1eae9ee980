-- One session model (issue 13). A Managed Agents session is a seed-004
-- session: a row in sessions (kind = 'managed'), its events are its
-- messages (role = event type, content = event JSON, event_id = event id),
-- each turn is a run (the running run with an owner is the run row of
-- seed 000: owner, lease, recovery), and every step boundary is a
-- checkpoint that names the workspace snapshot taken there.
--
-- This migration adds the columns; the rows of managed_sessions,
-- session_events and run_rows are moved by the store at Open, one
-- transaction per session (so a kill mid-way resumes where it stopped),
-- and the three tables are dropped once they are empty (migrate_sessions.go).

ALTER TABLE sessions ADD COLUMN kind TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN agent_id TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN agent_version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN environment_id TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN doc TEXT NOT NULL DEFAULT '{}';
ALTER TABLE sessions ADD COLUMN sandbox_id TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN usage TEXT;
ALTER TABLE sessions ADD COLUMN processed_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN stop_reason TEXT;
ALTER TABLE sessions ADD COLUMN terminated_at INTEGER;
ALTER TABLE sessions ADD COLUMN archived_at INTEGER;
-- active_us: the summed duration of the session's finished turns (a
-- running turn's time is added when it is read).
ALTER TABLE sessions ADD COLUMN active_us INTEGER NOT NULL DEFAULT 0;
-- Lineage: a fork names its source and the seq it was forked at; an
-- abandoned branch (what a rewind cut off) names the session it was cut
-- from and the seq that session went back to.
ALTER TABLE sessions ADD COLUMN forked_from TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN forked_at_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN branch_of TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN branch_at_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN branched_at INTEGER;
-- rewinds counts the session's rewinds: a runtime that folded its log
-- before one folds it again.
ALTER TABLE sessions ADD COLUMN rewinds INTEGER NOT NULL DEFAULT 0;
-- workspace_seed: the workspace snapshot the session's next sandbox starts
-- from ('' = empty).
ALTER TABLE sessions ADD COLUMN workspace_seed TEXT NOT NULL DEFAULT '';
CREATE INDEX sessions_managed ON sessions (tenant_id, id) WHERE kind = 'managed' AND branch_of = '';
CREATE INDEX sessions_managed_agent ON sessions (tenant_id, agent_id, id) WHERE kind = 'managed' AND branch_of = '';
CREATE INDEX sessions_branches ON sessions (branch_of, created_at) WHERE branch_of <> '';

ALTER TABLE messages ADD COLUMN event_id TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX messages_event_id ON messages (session_id, event_id) WHERE event_id <> '';

-- The run row of a turn: owner and lease while it runs. At most one
-- owned running run per session: the index is the turn lock.
ALTER TABLE runs ADD COLUMN turn_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN lease_expires_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN recovering INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN recovery_attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN last_progress_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN usage TEXT;
ALTER TABLE runs ADD COLUMN checkpoint_id TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX runs_live ON runs (session_id) WHERE status = 'running' AND owner <> '';

ALTER TABLE checkpoints ADD COLUMN workspace TEXT NOT NULL DEFAULT '';
CREATE INDEX checkpoints_workspace ON checkpoints (workspace) WHERE workspace <> '';

-- Session resources follow their session's rows, wherever they live: no
-- foreign key (DeleteManagedSession removes them in its transaction).
CREATE TABLE session_resources_new (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL DEFAULT '',
    session_id  TEXT NOT NULL,
    kind        TEXT NOT NULL,
    mount_path  TEXT NOT NULL,
    doc         TEXT NOT NULL,
    secret      BLOB,
    key_id      TEXT NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    version     INTEGER NOT NULL DEFAULT 1
);
INSERT INTO session_resources_new (id, tenant_id, session_id, kind, mount_path, doc, secret, key_id,
    created_at, updated_at, version)
SELECT id, tenant_id, session_id, kind, mount_path, doc, secret, key_id, created_at, updated_at, version
FROM session_resources;
DROP TABLE session_resources;
ALTER TABLE session_resources_new RENAME TO session_resources;
CREATE INDEX session_resources_session ON session_resources (session_id, id);
CREATE UNIQUE INDEX session_resources_mount ON session_resources (session_id, mount_path);

-- A termination the monitor claimed and did not finish (the daemon died in
-- its sequence) is resumed: completed says how its task ends (completed,
-- not failed, when the agent had completed).
ALTER TABLE terminations ADD COLUMN completed INTEGER NOT NULL DEFAULT 0;
CREATE INDEX terminations_unfinished ON terminations (at) WHERE finished_at IS NULL;
