-- Multi-agent threads (issue 14): a session thread is a managed session of
-- its own (events, turns, run rows, journal) opened by the coordinator of
-- the session thread_of names. Threads are not listed among the tenant's
-- sessions and go with their parent.
ALTER TABLE sessions ADD COLUMN thread_of TEXT NOT NULL DEFAULT '';
CREATE INDEX sessions_thread_of ON sessions (thread_of, created_at, id) WHERE thread_of <> '';
