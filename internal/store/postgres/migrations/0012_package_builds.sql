-- Builds of environments' config.packages: one row per tenant and key (a
-- hash of the package lists, the driver and the base image), so the same
-- packages are built once. version counts writes; an update compares it.
-- The layer itself is a directory under the daemon's data dir, rebuilt
-- when it is missing (a restore on another disk). Ids are COLLATE "C" as
-- in 0004.

CREATE TABLE package_builds (
    tenant_id      text NOT NULL DEFAULT '',
    key            text COLLATE "C" NOT NULL,
    environment_id text COLLATE "C" NOT NULL DEFAULT '',
    status         text NOT NULL,
    progress       text NOT NULL DEFAULT '',
    package        text NOT NULL DEFAULT '',
    log_tail       text NOT NULL DEFAULT '',
    sandbox_id     text COLLATE "C" NOT NULL DEFAULT '',
    version        bigint NOT NULL DEFAULT 1,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, key)
);
