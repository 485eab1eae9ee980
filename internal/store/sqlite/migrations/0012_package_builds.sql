-- Builds of environments' config.packages: one row per tenant and key (a
-- hash of the package lists, the driver and the base image), so the same
-- packages are built once. version counts writes; an update compares it.
-- The layer itself is a directory under the daemon's data dir, rebuilt
-- when it is missing (a restore on another disk). Times are unix
-- microseconds as in 0001.

CREATE TABLE package_builds (
    tenant_id      TEXT NOT NULL DEFAULT '',
    key            TEXT NOT NULL,
    environment_id TEXT NOT NULL DEFAULT '',
    status         TEXT NOT NULL,
    progress       TEXT NOT NULL DEFAULT '',
    package        TEXT NOT NULL DEFAULT '',
    log_tail       TEXT NOT NULL DEFAULT '',
    sandbox_id     TEXT NOT NULL DEFAULT '',
    version        INTEGER NOT NULL DEFAULT 1,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, key)
);
