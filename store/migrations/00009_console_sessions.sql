-- +goose Up
-- The web console's sign-in sessions (docs/console.md): the SHA-256 of
-- the session token (the token itself is only in the browser's cookie),
-- the key it was opened with (NULL for the operator's admin key, whose
-- fingerprint admin_fp names instead), and when it expires or was
-- revoked. A session whose key is revoked is dead: the lookup joins the
-- key and requires it unrevoked.
CREATE TABLE console_sessions (
    hash       TEXT PRIMARY KEY,
    key_id     TEXT REFERENCES keys(id),
    admin_fp   TEXT,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    revoked_at BIGINT
);
CREATE INDEX console_sessions_key ON console_sessions (key_id);

-- +goose Down
DROP INDEX console_sessions_key;
DROP TABLE console_sessions;
