-- A session resource's sealed token is rewritten by two writers: the API
-- (a new authorization_token) and a vault key rotation (the same token
-- re-sealed under the new key). version counts writes so the rotation's
-- write is conditional on the row it read, as vault credentials' is (0008):
-- a rotation never puts back a token the API has replaced.

ALTER TABLE session_resources ADD COLUMN version bigint NOT NULL DEFAULT 1;
