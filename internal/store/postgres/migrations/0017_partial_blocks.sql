-- The block a step's model response was streaming when last saved (issue
-- 13, partial output): one row per step, overwritten per batch of tokens,
-- so a step resumed after a crash continues the block instead of
-- repeating it. Deleted with the step's stream chunks.
CREATE TABLE partial_blocks (
    session_id  text NOT NULL,
    turn_seq    bigint NOT NULL,
    step        bigint NOT NULL,
    block_index bigint NOT NULL,
    data        json NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (session_id, turn_seq, step)
);
