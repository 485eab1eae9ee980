-- Files of the Files API (/v1/files). The bytes are a blob (blob_key, in
-- store.BlobKeyColumns so the blob GC keeps it while the row exists),
-- written and fsynced before the row is inserted: a row always names a
-- complete blob, and a blob without a row (an upload cut off after its
-- Put) is the GC's. scope_session_id is the session a file belongs to
-- ('' for none). Ids are COLLATE "C" as in 0004.

CREATE TABLE files (
    id               text COLLATE "C" PRIMARY KEY,
    tenant_id        text NOT NULL DEFAULT '',
    filename         text NOT NULL,
    mime_type        text NOT NULL,
    size_bytes       bigint NOT NULL,
    sha256           text NOT NULL,
    blob_key         text NOT NULL,
    downloadable     boolean NOT NULL DEFAULT false,
    scope_session_id text COLLATE "C" NOT NULL DEFAULT '',
    expires_at       timestamptz,
    created_at       timestamptz NOT NULL
);
CREATE INDEX files_tenant_idx ON files (tenant_id, id);
CREATE INDEX files_scope_idx ON files (tenant_id, scope_session_id, id);
