-- Issue 16: ownership leases for several daemons on one store. A lease row
-- names its holder node until expires_at (unix microseconds, the store's
-- clock); token is the fencing token, drawn from the one-row lease_tokens
-- counter whenever the row changes holder, so tokens grow and are never
-- given twice, even after a release deletes the row (a max(token) over the
-- rows would hand a released token out again).
CREATE TABLE lease_tokens (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    last INTEGER NOT NULL
);
INSERT INTO lease_tokens (id, last) VALUES (1, 0);
CREATE TABLE leases (
    resource    TEXT PRIMARY KEY,
    node        TEXT NOT NULL,
    address     TEXT NOT NULL DEFAULT '',
    token       INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    acquired_at INTEGER NOT NULL
);
-- RenewLeases: every lease of one node.
CREATE INDEX leases_node ON leases (node);

-- The node whose driver runs the sandbox ('' on a daemon alone).
ALTER TABLE sandboxes ADD COLUMN node TEXT NOT NULL DEFAULT '';
-- The reaper's and recovery's listing: one node's running sandboxes (or
-- every node's), without reading the cold ones every hibernated object
-- keeps. The predicate is the one ListSandboxes writes for Running.
CREATE INDEX sandboxes_running ON sandboxes (node, id) WHERE handle IS NOT NULL OR stopping_at IS NOT NULL;
