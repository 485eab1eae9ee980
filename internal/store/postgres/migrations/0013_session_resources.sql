-- The resources of Managed Agents sessions (files, repositories, memory
-- stores mounted into the session's sandbox). doc is what the API shows;
-- a repository's authorization token is sealed by the daemon into secret
-- under key_id (as vault credentials are, 0008), never kept in clear. Two
-- resources of one session never share a mount path. Ids are COLLATE "C"
-- as in 0004.

CREATE TABLE session_resources (
    id          text COLLATE "C" PRIMARY KEY,
    tenant_id   text NOT NULL DEFAULT '',
    session_id  text COLLATE "C" NOT NULL REFERENCES managed_sessions (id) ON DELETE CASCADE,
    kind        text NOT NULL,
    mount_path  text NOT NULL,
    doc         json NOT NULL,
    secret      bytea,
    key_id      text COLLATE "C" NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);
CREATE INDEX session_resources_session_idx ON session_resources (session_id, id);
CREATE UNIQUE INDEX session_resources_mount_idx ON session_resources (session_id, mount_path);
