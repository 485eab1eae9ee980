-- The block a step's model response was streaming when last saved (issue
-- 13, partial output): one row per step, overwritten per batch of tokens,
-- so a step resumed after a crash continues the block instead of
-- repeating it. Deleted with the step's stream chunks.
CREATE TABLE partial_blocks (
    session_id  TEXT NOT NULL,
    turn_seq    INTEGER NOT NULL,
    step        INTEGER NOT NULL,
    block_index INTEGER NOT NULL,
    data        TEXT NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (session_id, turn_seq, step)
);
