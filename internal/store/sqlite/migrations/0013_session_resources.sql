-- The resources of Managed Agents sessions (files, repositories, memory
-- stores mounted into the session's sandbox). doc is what the API shows;
-- a repository's authorization token is sealed by the daemon into secret
-- under key_id (as vault credentials are, 0008), never kept in clear. Two
-- resources of one session never share a mount path. Times are unix
-- microseconds as in 0001.

CREATE TABLE session_resources (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL DEFAULT '',
    session_id  TEXT NOT NULL REFERENCES managed_sessions (id) ON DELETE CASCADE,
    kind        TEXT NOT NULL,
    mount_path  TEXT NOT NULL,
    doc         TEXT NOT NULL,
    secret      BLOB,
    key_id      TEXT NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE INDEX session_resources_session ON session_resources (session_id, id);
CREATE UNIQUE INDEX session_resources_mount ON session_resources (session_id, mount_path);
