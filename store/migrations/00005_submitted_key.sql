-- +goose Up
-- The key a run was submitted with: a run whose submitting key has been
-- revoked cannot be approved (it can still be rejected or cancelled).
ALTER TABLE runs ADD COLUMN submitted_key TEXT;

-- +goose Down
ALTER TABLE runs DROP COLUMN submitted_key;
