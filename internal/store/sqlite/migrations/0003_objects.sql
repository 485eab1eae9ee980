-- Durable objects (seed 002): registered classes, objects, their key-value
-- storage, alarms, and the audit log. Times are unix microseconds as in
-- 0001. tenant_id has no foreign key to tenants: objects, like sandboxes,
-- may belong to the internal '' owner.

CREATE TABLE object_classes (
    tenant_id            TEXT NOT NULL,
    class                TEXT NOT NULL,
    image                TEXT NOT NULL DEFAULT '',
    driver               TEXT NOT NULL DEFAULT '',
    idle_timeout_seconds INTEGER NOT NULL DEFAULT 0,
    init_command         TEXT, -- JSON array of strings
    max_concurrency      INTEGER NOT NULL DEFAULT 0,
    storage_mode         TEXT NOT NULL DEFAULT '',
    app_dir              TEXT NOT NULL DEFAULT '',
    env                  TEXT, -- JSON object of strings
    created_at           INTEGER NOT NULL,
    updated_at           INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, class)
) WITHOUT ROWID;

-- storage_keys and storage_bytes are kept equal to the object's storage rows
-- by every write that changes them, in the same transaction, so the runtime
-- checks the limits without scanning the storage.
CREATE TABLE objects (
    tenant_id     TEXT NOT NULL,
    class         TEXT NOT NULL,
    object_id     TEXT NOT NULL,
    status        TEXT NOT NULL,
    sandbox_id    TEXT NOT NULL DEFAULT '',
    storage_keys  INTEGER NOT NULL DEFAULT 0,
    storage_bytes INTEGER NOT NULL DEFAULT 0,
    version       INTEGER NOT NULL DEFAULT 1,
    last_call_at  INTEGER,
    hibernated_at INTEGER,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, class, object_id)
) WITHOUT ROWID;
-- Listings across tenants by status (the hibernation reaper, recovery).
CREATE INDEX objects_status ON objects (status, class, object_id);

-- value is BLOB so length(value) is its size in bytes (TEXT would count
-- characters); the engine validates it as JSON and keeps it byte for byte.
CREATE TABLE object_storage (
    tenant_id TEXT NOT NULL,
    class     TEXT NOT NULL,
    object_id TEXT NOT NULL,
    key       TEXT NOT NULL,
    value     BLOB NOT NULL,
    PRIMARY KEY (tenant_id, class, object_id, key),
    FOREIGN KEY (tenant_id, class, object_id) REFERENCES objects (tenant_id, class, object_id) ON DELETE CASCADE
) WITHOUT ROWID;

CREATE TABLE alarms (
    id         TEXT PRIMARY KEY,
    tenant_id  TEXT NOT NULL,
    class      TEXT NOT NULL,
    object_id  TEXT NOT NULL,
    method     TEXT NOT NULL,
    args       TEXT,
    fire_at    INTEGER NOT NULL,
    fired      INTEGER NOT NULL DEFAULT 0,
    attempts   INTEGER NOT NULL DEFAULT 0,
    last_error TEXT NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    FOREIGN KEY (tenant_id, class, object_id) REFERENCES objects (tenant_id, class, object_id) ON DELETE CASCADE
);
-- One pending alarm per (object, method), enforced here and not only by
-- SetAlarm's delete-then-insert.
CREATE UNIQUE INDEX alarms_one_pending ON alarms (tenant_id, class, object_id, method) WHERE fired = 0;
CREATE INDEX alarms_due ON alarms (fired, fire_at, id);
CREATE INDEX alarms_object ON alarms (tenant_id, class, object_id, fire_at);

-- Audit ids are time-ordered (ids.New), so id order is append order.
CREATE TABLE audit (
    id        TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL DEFAULT '',
    kind      TEXT NOT NULL,
    subject   TEXT NOT NULL DEFAULT '',
    data      TEXT,
    at        INTEGER NOT NULL
);
CREATE INDEX audit_tenant ON audit (tenant_id, id);
