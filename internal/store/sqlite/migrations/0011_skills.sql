-- Skills of the Managed Agents API and their versions. A version is one
-- validated upload of a skill directory, normalised into a zip kept in the
-- blob store under blob_key (listed in store.BlobKeyColumns, so the blob
-- GC keeps it while the row exists). Versions are ids made of unix
-- microseconds, so within a skill they sort as they were made; the latest
-- version is read from them, never stored apart. Times are unix
-- microseconds as in 0001.

CREATE TABLE skills (
    id           TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL DEFAULT '',
    display_name TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
);
CREATE INDEX skills_tenant ON skills (tenant_id, id);

CREATE TABLE skill_versions (
    skill_id    TEXT NOT NULL REFERENCES skills (id) ON DELETE CASCADE,
    version     TEXT NOT NULL,
    tenant_id   TEXT NOT NULL DEFAULT '',
    name        TEXT NOT NULL,
    description TEXT NOT NULL,
    directory   TEXT NOT NULL,
    blob_key    TEXT NOT NULL,
    sha256      TEXT NOT NULL,
    size        INTEGER NOT NULL,
    files       INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (skill_id, version)
);
