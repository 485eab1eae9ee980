-- Durable objects (seed 002): registered classes, objects, their key-value
-- storage, alarms, and the audit log. tenant_id has no foreign key to
-- tenants: objects, like sandboxes, may belong to the internal '' owner.
-- JSON columns use json (not jsonb) so values round-trip byte for byte and
-- storage_bytes matches what the runtime measured.

CREATE TABLE object_classes (
    tenant_id            text NOT NULL,
    class                text NOT NULL,
    image                text NOT NULL DEFAULT '',
    driver               text NOT NULL DEFAULT '',
    idle_timeout_seconds bigint NOT NULL DEFAULT 0,
    init_command         json, -- array of strings
    max_concurrency      bigint NOT NULL DEFAULT 0,
    storage_mode         text NOT NULL DEFAULT '',
    app_dir              text NOT NULL DEFAULT '',
    env                  json, -- object of strings
    created_at           timestamptz NOT NULL,
    updated_at           timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, class)
);

-- storage_keys and storage_bytes are kept equal to the object's storage rows
-- by every write that changes them, in the same transaction, so the runtime
-- checks the limits without scanning the storage.
CREATE TABLE objects (
    tenant_id     text NOT NULL,
    class         text NOT NULL,
    object_id     text NOT NULL,
    status        text NOT NULL,
    sandbox_id    text NOT NULL DEFAULT '',
    storage_keys  bigint NOT NULL DEFAULT 0,
    storage_bytes bigint NOT NULL DEFAULT 0,
    version       bigint NOT NULL DEFAULT 1,
    last_call_at  timestamptz,
    hibernated_at timestamptz,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, class, object_id)
);
-- Listings across tenants by status (the hibernation reaper, recovery).
CREATE INDEX objects_status_idx ON objects (status, class, object_id);

CREATE TABLE object_storage (
    tenant_id text NOT NULL,
    class     text NOT NULL,
    object_id text NOT NULL,
    key       text NOT NULL,
    value     json NOT NULL,
    PRIMARY KEY (tenant_id, class, object_id, key),
    FOREIGN KEY (tenant_id, class, object_id) REFERENCES objects (tenant_id, class, object_id) ON DELETE CASCADE
);

CREATE TABLE alarms (
    id         text PRIMARY KEY,
    tenant_id  text NOT NULL,
    class      text NOT NULL,
    object_id  text NOT NULL,
    method     text NOT NULL,
    args       json,
    fire_at    timestamptz NOT NULL,
    fired      boolean NOT NULL DEFAULT false,
    attempts   bigint NOT NULL DEFAULT 0,
    last_error text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    FOREIGN KEY (tenant_id, class, object_id) REFERENCES objects (tenant_id, class, object_id) ON DELETE CASCADE
);
-- One pending alarm per (object, method), enforced here and not only by
-- SetAlarm's delete-then-insert.
CREATE UNIQUE INDEX alarms_one_pending_idx ON alarms (tenant_id, class, object_id, method) WHERE fired = false;
CREATE INDEX alarms_due_idx ON alarms (fired, fire_at, id);
CREATE INDEX alarms_object_idx ON alarms (tenant_id, class, object_id, fire_at);

-- Audit ids are time-ordered (ids.New), so id order is append order.
CREATE TABLE audit (
    id        text PRIMARY KEY,
    tenant_id text NOT NULL DEFAULT '',
    kind      text NOT NULL,
    subject   text NOT NULL DEFAULT '',
    data      json,
    at        timestamptz NOT NULL
);
CREATE INDEX audit_tenant_id_idx ON audit (tenant_id, id);
