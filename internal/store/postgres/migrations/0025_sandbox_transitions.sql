-- Issue 17: a sandbox's state history. The state is derived from the
-- sandbox row's facts (seed 000); CreateSandbox and UpdateSandbox add a row
-- here in the same statement whenever the derived state differs from the
-- newest recorded one, so the history never says more or less than the
-- facts did. seq numbers one sandbox's transitions from 1; the newest 200
-- are kept. Sandboxes older than this table start their history at their
-- first change.
CREATE TABLE sandbox_transitions (
    sandbox_id text NOT NULL,
    seq        bigint NOT NULL,
    state      text NOT NULL,
    at         timestamptz NOT NULL,
    generation bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (sandbox_id, seq)
);
