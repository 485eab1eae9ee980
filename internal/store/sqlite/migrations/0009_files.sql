-- Files of the Files API (/v1/files). The bytes are a blob (blob_key, in
-- store.BlobKeyColumns so the blob GC keeps it while the row exists),
-- written and fsynced before the row is inserted: a row always names a
-- complete blob, and a blob without a row (an upload cut off after its
-- Put) is the GC's. scope_session_id is the session a file belongs to
-- ('' for none). Times are unix microseconds as in 0001.

CREATE TABLE files (
    id               TEXT PRIMARY KEY,
    tenant_id        TEXT NOT NULL DEFAULT '',
    filename         TEXT NOT NULL,
    mime_type        TEXT NOT NULL,
    size_bytes       INTEGER NOT NULL,
    sha256           TEXT NOT NULL,
    blob_key         TEXT NOT NULL,
    downloadable     INTEGER NOT NULL DEFAULT 0,
    scope_session_id TEXT NOT NULL DEFAULT '',
    expires_at       INTEGER,
    created_at       INTEGER NOT NULL
);
CREATE INDEX files_tenant ON files (tenant_id, id);
CREATE INDEX files_scope ON files (tenant_id, scope_session_id, id);
