-- +goose Up
-- The review of a finished run's change (its declared outputs against
-- its inputs): the risk tier the operator's policy gave it, how many
-- distinct approvers it needs, and each approver's decision. A run whose
-- executor reported no change has no review, and its result can never be
-- accepted.
CREATE TABLE run_reviews (
    run_id         TEXT PRIMARY KEY REFERENCES runs(id),
    classification BYTEA NOT NULL,
    tier           TEXT NOT NULL,
    needed         INTEGER NOT NULL,
    state          TEXT NOT NULL,
    created_at     BIGINT NOT NULL,
    decided_at     BIGINT
);
CREATE TABLE review_decisions (
    run_id   TEXT NOT NULL REFERENCES run_reviews(run_id),
    user_id  TEXT NOT NULL,
    decision TEXT NOT NULL,
    reason   TEXT NOT NULL,
    at       BIGINT NOT NULL,
    PRIMARY KEY (run_id, user_id)
);
-- Operator settings that workers on every host must share (the risk
-- policy): one row per name, written only through admin routes.
CREATE TABLE settings (
    name       TEXT PRIMARY KEY,
    value      BYTEA NOT NULL,
    updated_at BIGINT NOT NULL
);

-- +goose Down
DROP TABLE settings;
DROP TABLE review_decisions;
DROP TABLE run_reviews;
