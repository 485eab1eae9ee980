-- Skills of the Managed Agents API and their versions. A version is one
-- validated upload of a skill directory, normalised into a zip kept in the
-- blob store under blob_key (listed in store.BlobKeyColumns, so the blob
-- GC keeps it while the row exists). Versions are ids made of unix
-- microseconds, so within a skill they sort as they were made; the latest
-- version is read from them, never stored apart. Ids are COLLATE "C" as
-- in 0004.

CREATE TABLE skills (
    id           text COLLATE "C" PRIMARY KEY,
    tenant_id    text NOT NULL DEFAULT '',
    display_name text NOT NULL,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL
);
CREATE INDEX skills_tenant_id_idx ON skills (tenant_id, id);

CREATE TABLE skill_versions (
    skill_id    text COLLATE "C" NOT NULL REFERENCES skills (id) ON DELETE CASCADE,
    version     text COLLATE "C" NOT NULL,
    tenant_id   text NOT NULL DEFAULT '',
    name        text NOT NULL,
    description text NOT NULL,
    directory   text NOT NULL,
    blob_key    text NOT NULL,
    sha256      text NOT NULL,
    size        bigint NOT NULL,
    files       bigint NOT NULL,
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (skill_id, version)
);
