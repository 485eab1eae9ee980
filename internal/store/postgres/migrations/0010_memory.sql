-- Memory stores of the Managed Agents API: text memories (path + content)
-- with their full version history. A memory's row is its current state;
-- every write appends a memory_versions row in the same transaction.
-- memory_id on a version has no foreign key: a deleted memory's versions
-- stay listable by its id. Ids and paths are COLLATE "C" (bytewise), which
-- is the order lists page in.

CREATE TABLE memory_stores (
    id          text COLLATE "C" PRIMARY KEY,
    tenant_id   text NOT NULL DEFAULT '',
    name        text NOT NULL,
    description text NOT NULL DEFAULT '',
    metadata    json NOT NULL,
    archived_at timestamptz,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);
CREATE INDEX memory_stores_tenant_id_idx ON memory_stores (tenant_id, id);

CREATE TABLE memories (
    id             text COLLATE "C" PRIMARY KEY,
    tenant_id      text NOT NULL DEFAULT '',
    store_id       text COLLATE "C" NOT NULL REFERENCES memory_stores (id) ON DELETE CASCADE,
    path           text COLLATE "C" NOT NULL,
    content        text NOT NULL,
    content_sha256 text NOT NULL,
    size_bytes     bigint NOT NULL,
    version_id     text COLLATE "C" NOT NULL,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL,
    UNIQUE (store_id, path)
);

CREATE TABLE memory_versions (
    id             text COLLATE "C" PRIMARY KEY,
    tenant_id      text NOT NULL DEFAULT '',
    store_id       text COLLATE "C" NOT NULL REFERENCES memory_stores (id) ON DELETE CASCADE,
    memory_id      text COLLATE "C" NOT NULL,
    operation      text NOT NULL,
    path           text,
    content        text,
    content_sha256 text,
    size_bytes     bigint,
    actor_type     text NOT NULL DEFAULT '',
    actor_id       text NOT NULL DEFAULT '',
    redacted_at    timestamptz,
    redactor_type  text NOT NULL DEFAULT '',
    redactor_id    text NOT NULL DEFAULT '',
    created_at     timestamptz NOT NULL
);
CREATE INDEX memory_versions_store_idx ON memory_versions (store_id, id);
CREATE INDEX memory_versions_memory_idx ON memory_versions (memory_id, id);
