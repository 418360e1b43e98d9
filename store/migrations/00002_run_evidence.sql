-- +goose Up
-- A run's record (.cordon as a gzipped tar) and its journal, written by
-- the worker that executed it, so that the API serves them whichever host
-- ran the run. BYTEA is PostgreSQL's; SQLite stores the bytes as given.
CREATE TABLE run_evidence (
    run_id     TEXT PRIMARY KEY REFERENCES runs(id),
    record     BYTEA NOT NULL,
    journal    BYTEA NOT NULL,
    created_at BIGINT NOT NULL
);

-- +goose Down
DROP TABLE run_evidence;
