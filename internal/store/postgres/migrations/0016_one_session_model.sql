-- One session model (issue 13). A Managed Agents session is a seed-004
-- session: a row in sessions (kind = 'managed'), its events are its
-- messages (role = event type, content = event JSON, event_id = event id;
-- message_count is the event counter appends advance under the row lock),
-- each turn is a run (the running run with an owner is the run row of
-- seed 000: owner, lease, recovery), and every step boundary is a
-- checkpoint that names the workspace snapshot taken there.
--
-- This migration adds the columns; the rows of managed_sessions,
-- session_events and run_rows are moved by the store at Open, one
-- transaction per session (so a kill mid-way resumes where it stopped),
-- and the three tables are dropped once they are empty
-- (migrate_sessions.go). Managed listings page by id in byte order: their
-- indexes and queries use COLLATE "C" as 0004 did.

ALTER TABLE sessions
    ADD COLUMN kind text NOT NULL DEFAULT '',
    ADD COLUMN agent_id text NOT NULL DEFAULT '',
    ADD COLUMN agent_version bigint NOT NULL DEFAULT 0,
    ADD COLUMN environment_id text NOT NULL DEFAULT '',
    ADD COLUMN doc json NOT NULL DEFAULT '{}',
    ADD COLUMN sandbox_id text NOT NULL DEFAULT '',
    ADD COLUMN usage json,
    ADD COLUMN processed_seq bigint NOT NULL DEFAULT 0,
    ADD COLUMN stop_reason json,
    ADD COLUMN terminated_at timestamptz,
    ADD COLUMN archived_at timestamptz,
    -- the summed duration of the session's finished turns, microseconds
    ADD COLUMN active_us bigint NOT NULL DEFAULT 0,
    ADD COLUMN forked_from text NOT NULL DEFAULT '',
    ADD COLUMN forked_at_seq bigint NOT NULL DEFAULT 0,
    ADD COLUMN branch_of text NOT NULL DEFAULT '',
    ADD COLUMN branch_at_seq bigint NOT NULL DEFAULT 0,
    ADD COLUMN branched_at timestamptz,
    -- counts the session's rewinds: a runtime that folded its log before
    -- one folds it again
    ADD COLUMN rewinds bigint NOT NULL DEFAULT 0,
    ADD COLUMN workspace_seed text NOT NULL DEFAULT '';
CREATE INDEX sessions_managed_idx ON sessions (tenant_id, (id COLLATE "C"))
    WHERE kind = 'managed' AND branch_of = '';
CREATE INDEX sessions_managed_agent_idx ON sessions (tenant_id, agent_id, (id COLLATE "C"))
    WHERE kind = 'managed' AND branch_of = '';
CREATE INDEX sessions_branches_idx ON sessions (branch_of, created_at) WHERE branch_of <> '';

ALTER TABLE messages ADD COLUMN event_id text NOT NULL DEFAULT '';
CREATE UNIQUE INDEX messages_event_id_idx ON messages (session_id, event_id) WHERE event_id <> '';

ALTER TABLE runs
    ADD COLUMN turn_seq bigint NOT NULL DEFAULT 0,
    ADD COLUMN owner text NOT NULL DEFAULT '',
    ADD COLUMN lease_expires_at timestamptz,
    ADD COLUMN recovering boolean NOT NULL DEFAULT false,
    ADD COLUMN recovery_attempts bigint NOT NULL DEFAULT 0,
    ADD COLUMN last_progress_seq bigint NOT NULL DEFAULT 0,
    ADD COLUMN usage json,
    ADD COLUMN checkpoint_id text NOT NULL DEFAULT '';
-- At most one owned running run per session: the index is the turn lock.
CREATE UNIQUE INDEX runs_live_idx ON runs (session_id) WHERE status = 'running' AND owner <> '';

ALTER TABLE checkpoints ADD COLUMN workspace text NOT NULL DEFAULT '';
CREATE INDEX checkpoints_workspace_idx ON checkpoints (workspace) WHERE workspace <> '';

-- Session resources follow their session's rows, wherever they live: no
-- foreign key (DeleteManagedSession removes them in its transaction).
ALTER TABLE session_resources DROP CONSTRAINT session_resources_session_id_fkey;

-- A termination the monitor claimed and did not finish (the daemon died in
-- its sequence) is resumed: completed says how its task ends (completed,
-- not failed, when the agent had completed).
ALTER TABLE terminations ADD COLUMN completed boolean NOT NULL DEFAULT false;
CREATE INDEX terminations_unfinished_idx ON terminations (at) WHERE finished_at IS NULL;
