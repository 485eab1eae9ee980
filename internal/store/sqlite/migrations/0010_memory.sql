-- Memory stores of the Managed Agents API: text memories (path + content)
-- with their full version history. A memory's row is its current state;
-- every write appends a memory_versions row in the same transaction.
-- memory_id on a version has no foreign key: a deleted memory's versions
-- stay listable by its id. Paths compare bytewise (BINARY), which is the
-- order lists page in. Times are unix microseconds as in 0001.

CREATE TABLE memory_stores (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL DEFAULT '',
    name        TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    metadata    TEXT NOT NULL DEFAULT '{}',
    archived_at INTEGER,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE INDEX memory_stores_tenant ON memory_stores (tenant_id, id);

CREATE TABLE memories (
    id             TEXT PRIMARY KEY,
    tenant_id      TEXT NOT NULL DEFAULT '',
    store_id       TEXT NOT NULL REFERENCES memory_stores (id) ON DELETE CASCADE,
    path           TEXT NOT NULL,
    content        TEXT NOT NULL,
    content_sha256 TEXT NOT NULL,
    size_bytes     INTEGER NOT NULL,
    version_id     TEXT NOT NULL,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    UNIQUE (store_id, path)
);

CREATE TABLE memory_versions (
    id             TEXT PRIMARY KEY,
    tenant_id      TEXT NOT NULL DEFAULT '',
    store_id       TEXT NOT NULL REFERENCES memory_stores (id) ON DELETE CASCADE,
    memory_id      TEXT NOT NULL,
    operation      TEXT NOT NULL,
    path           TEXT,
    content        TEXT,
    content_sha256 TEXT,
    size_bytes     INTEGER,
    actor_type     TEXT NOT NULL DEFAULT '',
    actor_id       TEXT NOT NULL DEFAULT '',
    redacted_at    INTEGER,
    redactor_type  TEXT NOT NULL DEFAULT '',
    redactor_id    TEXT NOT NULL DEFAULT '',
    created_at     INTEGER NOT NULL
);
CREATE INDEX memory_versions_store ON memory_versions (store_id, id);
CREATE INDEX memory_versions_memory ON memory_versions (memory_id, id);
