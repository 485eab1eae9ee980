-- Issue 16: ownership leases for several daemons on one store. A lease row
-- names its holder node until expires_at (the store's clock); token is the
-- fencing token, drawn from lease_tokens whenever the row changes holder, so
-- tokens grow and are never given twice, even after a release deletes the
-- row. A write fenced by a token reads the row FOR SHARE, so a takeover
-- waits for that write's commit.
CREATE SEQUENCE lease_tokens;
CREATE TABLE leases (
    resource    text PRIMARY KEY,
    node        text NOT NULL,
    address     text NOT NULL DEFAULT '',
    token       bigint NOT NULL,
    expires_at  timestamptz NOT NULL,
    acquired_at timestamptz NOT NULL
);
-- RenewLeases: every lease of one node.
CREATE INDEX leases_node ON leases (node);

-- The node whose driver runs the sandbox ('' on a daemon alone).
ALTER TABLE sandboxes ADD COLUMN node text NOT NULL DEFAULT '';
-- The reaper's and recovery's listing: one node's running sandboxes (or
-- every node's), without reading the cold ones every hibernated object
-- keeps. The predicate is the one ListSandboxes writes for Running.
CREATE INDEX sandboxes_running ON sandboxes (node, id) WHERE handle IS NOT NULL OR stopping_at IS NOT NULL;
