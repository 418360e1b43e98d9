-- +goose Up
-- The control plane's audit log (docs/SPEC.md §10): one row per record,
-- appended in the transaction of the change it records. body is the
-- record's body (canonical JSON); id its chain link; nonce, with the
-- operator's audit key, derives the record's salt secret (never stored).
-- tenant_id scopes an export ("" for the operator's own events).
CREATE TABLE audit_log (
    seq        BIGINT PRIMARY KEY,
    tenant_id  TEXT NOT NULL,
    nonce      BYTEA NOT NULL,
    body       TEXT NOT NULL,
    id         TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX audit_log_tenant ON audit_log (tenant_id, seq);
-- The head: one row, locked (FOR UPDATE on PostgreSQL; SQLite's write
-- lock) by every append, so that the chain stays one line. key_id is the
-- fingerprint of the audit key the chain's salts derive from: a process
-- holding another key refuses to append.
CREATE TABLE audit_head (
    one    INTEGER PRIMARY KEY CHECK (one = 1),
    count  BIGINT NOT NULL,
    head   TEXT NOT NULL,
    key_id TEXT NOT NULL
);
INSERT INTO audit_head (one, count, head, key_id) VALUES (1, 0, '', '');

-- +goose Down
DROP TABLE audit_head;
DROP TABLE audit_log;
