-- +goose Up
CREATE TABLE tenants (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    ceiling    TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE TABLE users (
    id         TEXT PRIMARY KEY,
    tenant_id  TEXT NOT NULL REFERENCES tenants(id),
    name       TEXT NOT NULL,
    role       TEXT NOT NULL CHECK (role IN ('member', 'approver')),
    created_at BIGINT NOT NULL,
    UNIQUE (tenant_id, name)
);
CREATE TABLE keys (
    id         TEXT PRIMARY KEY,
    tenant_id  TEXT NOT NULL REFERENCES tenants(id),
    user_id    TEXT REFERENCES users(id),
    hash       TEXT NOT NULL UNIQUE,
    hint       TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT
);
CREATE TABLE projects (
    id         TEXT PRIMARY KEY,
    tenant_id  TEXT NOT NULL REFERENCES tenants(id),
    name       TEXT NOT NULL,
    config     TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (tenant_id, name)
);
CREATE TABLE runs (
    id           TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL REFERENCES tenants(id),
    project_id   TEXT NOT NULL REFERENCES projects(id),
    task         TEXT NOT NULL,
    config       TEXT NOT NULL,
    state        TEXT NOT NULL CHECK (state IN ('pending_approval', 'queued', 'running', 'finished', 'failed', 'cancelled', 'rejected')),
    submitted_by TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    decided_by   TEXT,
    decided_at   BIGINT,
    cancelled_by TEXT,
    cancelled_at BIGINT,
    started_at   BIGINT,
    finished_at  BIGINT,
    attempts     INTEGER NOT NULL DEFAULT 0,
    worker       TEXT,
    reason       TEXT,
    exit_code    INTEGER,
    tier         TEXT,
    status       TEXT
);
CREATE INDEX runs_tenant_created ON runs (tenant_id, created_at);
CREATE INDEX runs_state ON runs (state);

-- +goose Down
DROP TABLE runs;
DROP TABLE projects;
DROP TABLE keys;
DROP TABLE users;
DROP TABLE tenants;
