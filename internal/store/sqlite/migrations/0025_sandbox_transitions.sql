-- Issue 17: a sandbox's state history. The state is derived from the
-- sandbox row's facts (seed 000); CreateSandbox and UpdateSandbox add a row
-- here in the same transaction whenever the derived state differs from the
-- newest recorded one, so the history never says more or less than the
-- facts did. seq numbers one sandbox's transitions from 1; the newest 200
-- are kept; at is unix microseconds. Sandboxes older than this table start
-- their history at their first change.
CREATE TABLE sandbox_transitions (
    sandbox_id TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    state      TEXT NOT NULL,
    at         INTEGER NOT NULL,
    generation INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (sandbox_id, seq)
) WITHOUT ROWID;
